# kwok (the node and pod lifecycle simulator) and kwokctl (cluster lifecycle; we use its binary runtime).
cd "$WORK"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/kwok 1.24

step "resolve dependencies"
go get -tool "sigs.k8s.io/kwok/cmd/kwok@v$VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@v$VERSION"

for c in kwok kwokctl; do
    step "compile $c"
    go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$c" "sigs.k8s.io/kwok/cmd/$c"
done

step "check the version"
"$OUT/bin/kwokctl" --version >version.txt
grep -q "v$VERSION" version.txt
