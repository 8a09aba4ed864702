# kwok (the node and pod lifecycle simulator) and kwokctl (cluster lifecycle; we use its binary runtime), with
# esi's changes so that kwok writes to pods, follows them and admits them as the kubelet does. The changes are in
# tools/recipes/kwok/: patches to kwok's files (N-*.patch, applied in order; each says what it changes and why)
# and esi's own Go files with their tests (pkg/…, copied into the module at the same place). The patched
# packages' tests, kwok's and esi's, run before the build: a patch that no longer applies, compiles or holds
# fails it.
changes="${BASH_SOURCE[0]%.sh}"
cd "$WORK"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/kwok 1.24

step "resolve dependencies"
go get -tool "sigs.k8s.io/kwok/cmd/kwok@v$VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@v$VERSION"

step "patch kwok"
src="$WORK/kwok-src"
[ ! -e "$src" ] || chmod -R u+w "$src"  # a copy of the module cache's read-only files, left by an earlier run
rm -rf "$src"
cp -R "$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$VERSION" "$src"
chmod -R u+w "$src"
cp -R "$changes/pkg/." "$src/pkg/"
for change in "$changes"/*.patch; do
    patch --quiet --forward --fuzz=0 --no-backup-if-mismatch -d "$src" -p1 <"$change"
done
go mod edit -replace "sigs.k8s.io/kwok=$src"

step "test the patched packages"
# kwok's own tests log at length: the failures are repeated last, where the toolchain's report shows them.
if ! (cd "$src" && go test ./pkg/kwok/controllers/ ./pkg/utils/informer/) >go-test.log 2>&1; then
    cat go-test.log
    echo "the patched packages' tests failed (all output above):"
    grep -E -A3 -- '--- FAIL|^panic:|^FAIL' go-test.log
    exit 1
fi
cat go-test.log

for c in kwok kwokctl; do
    step "compile $c"
    go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$c" "sigs.k8s.io/kwok/cmd/$c"
done

step "check the version"
"$OUT/bin/kwokctl" --version >version.txt
grep -q "v$VERSION" version.txt
