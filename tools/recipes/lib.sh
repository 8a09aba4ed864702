# Shared prelude for toolchain recipes; sourced before each recipe by infra/toolchain/__init__.py.
#
# A recipe gets, in its environment:
#   TOOL     the tool's name (e.g. "kubernetes")
#   VERSION  the pinned version (without a leading "v")
#   WORK     a scratch directory kept between runs (wrapper modules live here, so a rerun is cheap)
#   OUT      an empty directory; the recipe puts executables in "$OUT/bin". The runner moves it into
#            the cache only when the recipe exits 0, so a half-built tool is never mistaken for done.
# plus the pins the tool declares in infra/toolchain/__init__.py TOOLS, as PIN_<NAME> (upper case, "-" -> "_").
#
# `step "what"` announces a step; when a command fails, the runner reports the tool and the last step.
set -euo pipefail
# GOTOOLCHAIN=local: a module asking for a newer Go fails at once instead of trying to download one.
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

step() {
    printf '%s\n' "$*" >"$WORK/.step"
    printf '    [%s] %s\n' "$TOOL" "$*" >&2
}

# go_wrapper_module MODULE_PATH GO_VERSION: start a throw-away wrapper module in the current directory.
go_wrapper_module() {
    rm -f go.mod go.sum
    printf 'module %s\n\ngo %s\n' "$1" "$2" >go.mod
}

step "check for the Go toolchain"
command -v go >/dev/null || { echo "the Go toolchain (go) is not on PATH" >&2; exit 1; }
