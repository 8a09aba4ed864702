# esi — the two commands a fresh machine needs are `make up` and `make test`; `make help` lists the rest.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The virtualenv is rebuilt whenever pyproject.toml changes.
VENV_STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
PYTEST_ARGS ?=
WORKERS ?= 2

.PHONY: help up preview down status tools venv browser node-packages test unit integration lint typecheck format crds docs bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

up: tools venv node-packages ## pulumi up of the local stack: control plane, KWOK nodes, esi, manifests/; prints where the API is
	$(BIN)/python -m infra.stacks.stack up

preview: tools venv ## pulumi preview of the local stack: what `make up` would change (e.g. a new manifest)
	$(BIN)/python -m infra.stacks.stack preview

down: tools venv ## pulumi destroy of the local stack: no process or file left but Pulumi's state
	$(BIN)/python -m infra.stacks.stack down

status: venv ## the local stack's outputs again (API URL, token, kubeconfig)
	$(BIN)/python -m infra.stacks.stack outputs

tools: ## build the missing binaries (Kubernetes, etcd, KWOK, Pulumi) into the cache; free when cached
	$(PYTHON) -m infra.toolchain ensure

venv: $(VENV_STAMP) ## the project's virtualenv: esi editable with every extra (.[dev]), all pinned

$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

browser: venv ## Debian's Chromium for the UI's browser test (apt-get, only if missing)
	$(BIN)/python -m infra.toolchain.browser ensure

node-packages: ## Debian's containerd, runc, CNI plugins, umoci, skopeo, a JRE and Maven for real nodes and images (apt-get if missing; without root: skipped)
	$(PYTHON) -m infra.toolchain.node_packages ensure --optional

test: lint typecheck tools venv browser node-packages ## the whole suite: lint, types, unit and integration tests
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup $(PYTEST_ARGS)

unit: venv ## unit tests only (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: tools venv browser node-packages ## integration tests only (one shared local cluster)
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup tests/integration $(PYTEST_ARGS)

lint: venv ## ruff lint and format check; the import contracts of .importlinter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: venv ## mypy --strict
	$(BIN)/mypy

format: venv ## apply ruff's formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

crds: venv ## regenerate crds/ from the models in esi/ (and crds/sim/ from sim/crds.py)
	$(BIN)/python -m infra.stacks.crds
	$(BIN)/python -m sim.crds

docs: venv ## build the docs site into site/ (reference pages generated from the code; tests build it with --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: tools venv ## run the benchmarks; they print figures (nothing is asserted)
	$(BIN)/python -m bench.extender
	$(BIN)/python -m bench.ghosts
	$(BIN)/python -m bench.testbed_status
	$(BIN)/python -m bench.placement
	$(BIN)/python -m bench.jobs
	$(BIN)/python -m bench.api
