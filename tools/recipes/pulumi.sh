# The Pulumi CLI and its Python language host, from the Go module proxy.
#
# The CLI is github.com/pulumi/pulumi/pkg/v3/cmd/pulumi at the pinned PyPI `pulumi` version. pkg/v3's go.mod
# swaps a clipboard library for a fork, which Go ignores in a dependency, so the wrapper copies it.
#
# The proxy answers 403 for every version of the standalone module
# github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3. Until v3.79 the same host was a package
# of sdk/v3 itself; that is what we build (PIN_PULUMI_PYTHON_HOST_SDK), in a wrapper of its own so its
# older sdk does not leak into the CLI. It speaks the same LanguageRuntime gRPC protocol. It runs programs
# through the `pulumi-language-python-exec` shim, taken from the sdk matching the CLI.
cd "$WORK"
sdk=github.com/pulumi/pulumi/sdk/v3

step "write the CLI wrapper module"
mkdir -p cli host
cd cli
go_wrapper_module esi.local/toolchain/pulumi 1.24
printf 'replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e\n' >>go.mod

step "resolve the CLI's dependencies"
go get -tool "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v$VERSION" "$sdk@v$VERSION"

step "compile pulumi (long: the whole engine)"
go build -trimpath -ldflags "-s -w -X $sdk/go/common/version.Version=v$VERSION" \
    -o "$OUT/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
sdk_dir=$(go list -m -f '{{.Dir}}' "$sdk")

step "resolve the Python language host (sdk/v3 v$PIN_PULUMI_PYTHON_HOST_SDK)"
cd ../host
go_wrapper_module esi.local/toolchain/pulumi-language-python 1.24
go get -tool "$sdk/python/cmd/pulumi-language-python@v$PIN_PULUMI_PYTHON_HOST_SDK"

step "compile pulumi-language-python"
go build -trimpath -ldflags "-s -w -X $sdk/go/common/version.Version=v$PIN_PULUMI_PYTHON_HOST_SDK" \
    -o "$OUT/bin/pulumi-language-python" "$sdk/python/cmd/pulumi-language-python"

step "install the Python exec shim"
install -m 0755 "$sdk_dir/python/cmd/pulumi-language-python-exec" "$OUT/bin/"

step "check the version stamp"
"$OUT/bin/pulumi" version | grep -qx "v$VERSION"
