# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet (the node agent of the local
# cluster's real nodes, infra/local_cluster/real_node.py) and kube-proxy (their Services, infra/local_cluster/network.py) from the
# Go module k8s.io/kubernetes.
# Its go.mod replaces every staging module (k8s.io/api, k8s.io/client-go, ...) with a local folder, so it
# cannot be `go install`ed; a wrapper module requires it and points each staging module at its published
# v0.<minor>.<patch> instead.
cd "$WORK"
staging="0.${VERSION#1.}"
commands="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy"

step "read k8s.io/kubernetes v$VERSION go.mod"
upstream_mod=$(go mod download -json "k8s.io/kubernetes@v$VERSION" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')
go_directive=$(awk '$1 == "go" {print $2; exit}' "$upstream_mod")

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/kubernetes "$go_directive"
{
    grep -E '^godebug ' "$upstream_mod" || true
    printf '\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$VERSION"
    grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$upstream_mod" |
        awk -v v="v$staging" '{printf "\t%s => %s %s\n", $1, $1, v}'
    printf ')\n'
} >>go.mod

step "resolve dependencies"
for c in $commands; do go get -tool "k8s.io/kubernetes/cmd/$c@v$VERSION"; done

# Without the version stamp every component reports v0.0.0-master, and the apiserver's compatibility
# version checks misbehave.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$VERSION -X $pkg.gitMajor=${VERSION%%.*}"
    ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$VERSION") -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

for c in $commands; do
    step "compile $c (the first one takes long: most of Kubernetes is shared)"
    go build -trimpath -ldflags "$ldflags" -o "$OUT/bin/$c" "k8s.io/kubernetes/cmd/$c"
done

step "check the version stamp"
"$OUT/bin/kube-apiserver" --version >version.txt
grep -qx "Kubernetes v$VERSION" version.txt
