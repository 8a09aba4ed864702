# The kubeflow Spark operator's controller (spark-operator) from github.com/kubeflow/spark-operator/v2, and its
# CustomResourceDefinitions (config/crd/bases) and Helm chart (charts/spark-operator-chart) copied from that same
# module version, so the CRDs and the chart always match the controller.
#
# Its go.mod replaces every k8s.io module with one pinned version; replace directives of a dependency are
# ignored, so the wrapper module repeats them (otherwise Go's minimal version selection could pick other
# k8s.io versions than the operator was built and tested with).
cd "$WORK"
module="github.com/kubeflow/spark-operator/v2"

step "read $module v$VERSION go.mod"
info=$(go mod download -json "$module@v$VERSION")
upstream_mod=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
source_dir=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])' <<<"$info")
# The proxy records the tag's commit; stamped in, the binary reports the release tag as its version.
commit=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", ""))' <<<"$info")
go_directive=$(awk '$1 == "go" {print $2; exit}' "$upstream_mod")

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/spark-operator "$go_directive"
{
    printf '\nrequire %s v%s\n\n' "$module" "$VERSION"
    awk '/^replace \(/ {inside = 1} inside {print} inside && /^\)/ {exit}' "$upstream_mod"
} >>go.mod

step "resolve dependencies"
go get -tool "$module/cmd/operator@v$VERSION"

step "compile spark-operator"
go build -trimpath -o "$OUT/bin/spark-operator" \
    -ldflags "-s -w -X $module.version=$VERSION -X $module.gitTag=v$VERSION -X $module.gitTreeState=clean \
        -X $module.gitCommit=$commit -X $module.buildDate=1970-01-01T00:00:00Z" \
    "$module/cmd/operator"

# Every CRD of the release: the controller also watches the ones esi does not use (SparkConnect since v2.3),
# and waits for their informers when it starts.
step "copy the CRDs of the same version"
mkdir -p "$OUT/crds"
install -m 0644 "$source_dir"/config/crd/bases/sparkoperator.k8s.io_*.yaml "$OUT/crds/"

# The release's own Helm chart, from the module's sources: the cluster stack installs it without a chart
# repository (infra.stacks.spark_operator.chart_dir).
step "copy the Helm chart of the same version"
cp -R "$source_dir"/charts/spark-operator-chart "$OUT/chart"
chmod -R u+w,go+rX "$OUT/chart"

step "check the version"
"$OUT/bin/spark-operator" version --short >version.txt
grep -q "$VERSION" version.txt
