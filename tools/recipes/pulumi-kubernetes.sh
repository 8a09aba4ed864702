# pulumi-resource-kubernetes, the Pulumi Kubernetes provider plugin, from the Go module
# github.com/pulumi/pulumi-kubernetes/provider/v4. That module has no tags of its own, so
# PIN_PULUMI_KUBERNETES_COMMIT names the release commit as a full pseudo-version (this proxy does not
# resolve bare commit hashes). The plugin version is the PyPI version in semver form (4.25.0a1768448096 ->
# 4.25.0-alpha.1768448096): the Python SDK asks the engine for exactly that plugin.
#
# The main package go:embeds schema-embed.json and terraform-mapping-embed.json, which are not in the
# repository: the provider's own generate.go makes them from schema.json and terraform-mapping.json (both in
# the module zip), stamping the version in. So main.go is built from a copy beside the generated files.
cd "$WORK"
module=github.com/pulumi/pulumi-kubernetes/provider/v4
main=cmd/pulumi-resource-kubernetes
plugin_version=$(sed -E 's/^([0-9]+\.[0-9]+\.[0-9]+)a([0-9]+)$/\1-alpha.\2/' <<<"$VERSION")
# The checksum database does not answer for several github.com/pulumi module versions the provider needs.
export GONOSUMDB=github.com/pulumi

step "resolve $module@$PIN_PULUMI_KUBERNETES_COMMIT"
go_wrapper_module esi.local/toolchain/pulumi-kubernetes 1.24
go get "$module@$PIN_PULUMI_KUBERNETES_COMMIT"
src=$(go list -m -f '{{.Dir}}' "$module")

step "generate the embedded schema (version $plugin_version)"
rm -rf cmd generate.go schema.json terraform-mapping.json
mkdir -p "$main"
install -m 0644 "$src/$main/generate.go" "$src/$main/schema.json" "$src/$main/terraform-mapping.json" .
VERSION=$plugin_version go run generate.go
install -m 0644 "$src/$main/main.go" "$main/"
mv schema-embed.json terraform-mapping-embed.json "$main/"
rm generate.go schema.json terraform-mapping.json

step "compile pulumi-resource-kubernetes (long)"
go build -trimpath -ldflags "-s -w -X $module/pkg/version.Version=$plugin_version" \
    -o "$OUT/bin/pulumi-resource-kubernetes" "./$main"
