# CoreDNS, the cluster DNS of the local cluster's real nodes (infra/local_cluster/network.py), from the Go module
# github.com/coredns/coredns. Its go.mod has no replace directives, so a plain wrapper module that requires
# it is enough (`go get` raises the wrapper's go directive to CoreDNS's own); its main package is the module's
# root, with the release's plugins (plugin.cfg) compiled in.
cd "$WORK"
module="github.com/coredns/coredns"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/coredns 1.24

step "resolve dependencies"
go get -tool "$module@v$VERSION"

step "compile coredns"
go build -trimpath -ldflags "-s -w" -o "$OUT/bin/coredns" "$module"

step "check the version"
"$OUT/bin/coredns" -version >version.txt
grep -q "CoreDNS-$VERSION" version.txt
