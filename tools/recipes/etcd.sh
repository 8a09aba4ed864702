# etcd (server) and etcdctl from the Go modules go.etcd.io/etcd/{server,etcdctl}/v3. Their go.mod files
# replace sibling modules with local folders, which Go ignores for a dependency, so a plain wrapper
# module that requires the published siblings is enough.
cd "$WORK"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/etcd 1.24

step "resolve dependencies"
go get -tool "go.etcd.io/etcd/server/v3@v$VERSION" "go.etcd.io/etcd/etcdctl/v3@v$VERSION"

step "compile etcd"
go build -trimpath -ldflags "-s -w" -o "$OUT/bin/etcd" go.etcd.io/etcd/server/v3
step "compile etcdctl"
go build -trimpath -ldflags "-s -w" -o "$OUT/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3

step "check the version"
"$OUT/bin/etcd" --version >version.txt  # not piped into grep -q: SIGPIPE would fail the recipe
grep -q "etcd Version: $VERSION" version.txt
