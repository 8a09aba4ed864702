"""The docs site's reference pages, generated from the code each time the site is built (an mkdocs hook).

``mkdocs.yml`` names this file under ``hooks:``; ``on_files`` adds four pages that exist in no file:

* ``reference/rest-api.md`` — the external scheduler API and the extender, from their FastAPI apps' OpenAPI;
* ``reference/crds.md`` — Testbed, BatchJob and Scheduling, from the CRDs ``esi.resources.crds`` generates;
* ``reference/cli.md`` — the ``esi`` command, from its typer commands' ``--help``;
* ``reference/config.md`` — every ``esi:`` key either Pulumi stack reads, from the stacks' ``from_config``.

So the reference cannot drift from the code: a key, field, route or option appears here because the code has it.
The only place this module names ``infra``'s modules is ``INFRA_STACKS`` / ``INFRA_PROGRAM`` below.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # the `mkdocs` script does not put the working directory on sys.path
    sys.path.insert(0, str(REPO_ROOT))

import typer.main  # noqa: E402
from mkdocs.config.defaults import MkDocsConfig  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from api.app import create_api_app  # noqa: E402
from api.auth import StaticToken  # noqa: E402
from api.extender.app import create_extender_app  # noqa: E402
from esi.client.cli import app as cli_app  # noqa: E402
from esi.resources.crds import DEFINITIONS, crd  # noqa: E402

# infra's stack settings (module:class with a from_config(pulumi.Config) classmethod) and its program.
INFRA_STACKS: Mapping[str, str] = {
    "local": "infra.stacks.local:LocalEsiArgs",
    "cluster": "infra.stacks.cluster:ClusterEsiArgs",
}
INFRA_PROGRAM = "infra.__main__"

# What each key is for, in a sentence. The build fails when the code reads a key this table does not explain,
# or the table explains a key no stack reads (``config_page``).
CONFIG_KEYS: Mapping[str, str] = {
    "mode": "`local` or `cluster`: which kind of stack this is (default: the stack's name).",
    "manifests": "The folder of Testbeds, BatchJobs and Schedulings applied by `pulumi up`, relative to the "
    "repository ([GitOps](../how-to/gitops.md)).",
    "cluster": "The local cluster's name.",
    "workdir": "Where the local cluster's files live (relative: to the repository).",
    "nodes": "The KWOK nodes: a list of `{name, cpu, memory, labels}`; nodes are added, removed and relabelled "
    "to match.",
    "namespace": "Local: where the API looks when a request names no namespace, and where manifests without "
    "one go. Cluster: esi's own namespace, created and deleted by the stack.",
    "apiPort": "The API's port on 127.0.0.1 (REST, STOMP, the web UI).",
    "extenderPort": "The extender's port, which the second scheduler calls.",
    "operatorsLivenessPort": "The operators' health endpoint's port.",
    "simLivenessPort": "The simulator's health endpoint's port.",
    "simArgs": "Arguments of `python -m sim` (time scale, runtime jitter, failures; `python -m sim --help`).",
    "allowAnonymous": "`true` lets callers without a token read and submit, as the original ESI did; anyone "
    "who reaches the port may then do anything.",
    "realNodes": "How many real nodes (kubelet + containerd) to run beside the KWOK nodes; 0 goes without root "
    "([real nodes](../tutorials/real-nodes.md)).",
    "realNodeCpu": "The cpu each real node offers pods.",
    "realNodeMemory": "The memory each real node offers pods.",
    "realNamespace": "The namespace whose jobs run for real on the real nodes (real Spark operator, Flink "
    "stand-in); the simulator acts everywhere else.",
    "sparkOperatorHealthPort": "The real Spark operator's health endpoint's port.",
    "flinkStandInHealthPort": "The Flink stand-in's health endpoint's port.",
    "stalledAfter": "Seconds a run may wait from submission to be Running before its BatchJob and Scheduling "
    "say `Stalled` (unset: the operators' default, 300).",
    "keepRuns": "Runs kept per namespace, the newest; older ones are deleted (unset: the operators' default, 100,000).",
    "keepRunsFor": "Seconds a Run is kept; older ones are deleted (unset: however old).",
    "kubeconfig": "A kubeconfig file (or its text); unset: `$KUBECONFIG`, then `~/.kube/config`.",
    "context": "The kubeconfig's context; unset: its current one.",
    "image": "The image of the operators and the API ([build and push it](../how-to/install-on-a-cluster.md)).",
    "imagePullPolicy": "The pull policy of esi's own pods.",
    "schedulerImage": "The second scheduler's image: an upstream kube-scheduler, best of the cluster's minor version.",
    "apiNamespace": "Where the API looks when a request names no namespace, and where manifests without one go.",
    "nodeLabels": "Labels to put on existing nodes (node name → labels), e.g. a Testbed's node label; removed "
    "again by `pulumi destroy`.",
    "nodeSelector": "Where esi's own pods may run; empty: anywhere.",
    "installOperators": "`false` leaves both Helm releases (Spark and Flink operator) out.",
    "labelNodes": "`false` leaves out the API's permission to list and label nodes, which only `esi label-nodes` "
    "uses ([set up a Testbed's nodes](../how-to/install-on-a-cluster.md#labelling-nodes)).",
    "sparkOperator": "The kubeflow Spark operator's Helm release: `install`, `version`, `repo`, `namespace`, "
    "`values` (merged over esi's: all job namespaces, webhook off).",
    "flinkOperator": "The Apache Flink Kubernetes operator's Helm release: `install`, `version`, `repo`, "
    "`namespace`, `values` (merged over esi's: webhook off).",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


# ---------------------------------------------------------------------------------------------- REST API


def rest_api_page() -> str:
    api = create_api_app(StaticToken("docs")).openapi()
    extender = create_extender_app().openapi()
    lines = [
        "# REST API",
        "",
        "Generated from the OpenAPI of `python -m api` (`api.app.create_api_app`); a running API serves the same",
        "at `/docs` and `/openapi.json`. Every route but health and metrics takes `Authorization: Bearer <token>`;",
        "a refusal has one shape, `ApiError` below. The STOMP topics are described in the",
        "[API's explanation](../explanation/api.md#stomp).",
        "",
        *_operations(api),
        "## Extender",
        "",
        "The kube-scheduler extender (`api.extender.app.create_extender_app`), on a listener of its own",
        "(`--extender-port`): only the second scheduler calls it, in kube-scheduler's extender wire format.",
        "",
        *_operations(extender, level="###"),
        "## Schemas",
        "",
        *_schemas(api["components"]["schemas"] | extender["components"]["schemas"]),
    ]
    return "\n".join(lines)


def _operations(spec: Mapping[str, Any], level: str = "##") -> Iterator[str]:
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            yield f"{level} `{method.upper()} {path}`"
            yield ""
            yield f"**{op.get('summary', '')}.**" if op.get("summary") else ""
            if op.get("description"):
                yield ""
                yield _cell(op["description"])
            params = op.get("parameters", [])
            if params:
                yield ""
                yield "| parameter | in | type | description |"
                yield "|---|---|---|---|"
                for p in params:
                    kind = _type(p.get("schema", {}))
                    yield f"| `{p['name']}` | {p['in']} | {kind} | {_cell(p.get('description', ''))} |"
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            if body:
                yield ""
                yield f"Request body: {_type(body.get('schema', {}))}."
            yield ""
            yield "| status | answer |"
            yield "|---|---|"
            for status, answer in op.get("responses", {}).items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                shape = f" — {_type(schema)}" if schema else ""
                yield f"| {status} | {_cell(answer.get('description', ''))}{shape} |"
            yield ""


def _schemas(schemas: Mapping[str, Any]) -> Iterator[str]:
    for name, schema in sorted(schemas.items()):
        yield f"### {name}"
        yield ""
        if schema.get("description"):
            yield _cell(schema["description"])
            yield ""
        if "enum" in schema:
            yield "One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + "."
            yield ""
            continue
        properties = schema.get("properties", {})
        if properties:
            required = set(schema.get("required", []))
            yield "| field | type | required | description |"
            yield "|---|---|---|---|"
            for field, sub in properties.items():
                mark = "yes" if field in required else ""
                yield f"| `{field}` | {_type(sub)} | {mark} | {_cell(sub.get('description', ''))} |"
            yield ""


def _type(schema: Mapping[str, Any]) -> str:
    """A JSON schema as a short phrase, with links to the named schemas it refers to."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    combined = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if combined:
        return " or ".join(_type(s) for s in combined)
    kind = schema.get("type")
    phrase = str(kind or "any")
    if kind == "array":
        phrase = f"list of {_type(schema.get('items', {}))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        phrase = f"map of {_type(schema['additionalProperties'])}"
    elif "enum" in schema:
        phrase = " \\| ".join(f"`{v}`" for v in schema["enum"])
    elif "const" in schema:
        phrase = f"`{schema['const']}`"
    return phrase


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table: one line, pipes escaped, and angle brackets outside code spans
    shown as they are rather than read as HTML."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    parts[::2] = [p.replace("<", "&lt;").replace(">", "&gt;") for p in parts[::2]]
    return "`".join(parts)


# ---------------------------------------------------------------------------------------------- CRDs


def crds_page() -> str:
    lines = [
        "# Custom resources",
        "",
        "Generated from the pydantic models in `esi.resources` — the single source of truth: `make crds` writes the",
        "same CRDs into `crds/`, and the tests check them for drift. Group `esi.tu-berlin.de`, version `v1alpha1`,",
        "all namespaced, and all but Runs listed by `kubectl get esi`. The rules behind the fields:",
        "[design](../design.md).",
        "",
    ]
    for definition in DEFINITIONS:
        manifest = crd(definition)
        version = manifest["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        lines += [
            f"## {definition.kind}",
            "",
            f"`kubectl get {definition.plural}` (short name `{definition.short_name}`). Columns: "
            + ", ".join(f"{c['name']} (`{c['jsonPath']}`)" for c in version.get("additionalPrinterColumns", []))
            + ".",
            "",
        ]
        for part in ("spec", "status"):
            if part not in schema["properties"]:
                continue
            lines += [f"### {definition.kind} {part}", "", "| field | type | description |", "|---|---|---|"]
            lines += _crd_fields(schema["properties"][part], part)
            lines.append("")
        rules = list(dict.fromkeys(_cel_rules(schema, "")))  # a rule repeated on one field is stated once
        if rules:
            lines += [f"### {definition.kind} validation", "", "What the API server refuses, besides types:", ""]
            lines += [f"- `{path.lstrip('.') or '(object)'}`: {_cell(message)}" for path, message in rules]
            lines.append("")
    return "\n".join(lines)


def _crd_fields(schema: Mapping[str, Any], path: str) -> Iterator[str]:
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        here = f"{path}.{name}"
        kind = "int or string" if sub.get("x-kubernetes-int-or-string") else sub.get("type", "any")
        if kind == "array":
            kind = f"list of {sub.get('items', {}).get('type', 'any')}"
        notes = []
        if name in required:
            notes.append("required")
        if "default" in sub:
            notes.append(f"default `{json.dumps(sub['default'])}`")
        if "enum" in sub:
            notes.append("one of " + ", ".join(f"`{v}`" for v in sub["enum"]))
        description = _cell(sub.get("description", ""))
        extra = _cell(f"({'; '.join(notes)})") if notes else ""
        yield f"| `{here}` | {kind} | {' '.join(filter(None, (description, extra)))} |"
        nested = sub.get("items", sub) if sub.get("type") == "array" else sub
        if nested.get("properties"):
            yield from _crd_fields(nested, f"{here}[]" if sub.get("type") == "array" else here)


def _cel_rules(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule.get("message", rule["rule"])
    for name, sub in schema.get("properties", {}).items():
        yield from _cel_rules(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _cel_rules(schema["items"], f"{path}[]")


# ---------------------------------------------------------------------------------------------- CLI


def cli_page() -> str:
    def helped(*command: str) -> str:
        environment = {"COLUMNS": "100", "TTY_COMPATIBLE": "0", "FORCE_COLOR": None, "NO_COLOR": "1"}
        result = CliRunner().invoke(cli_app, [*command, "--help"], env=environment)
        if result.exit_code != 0:
            raise RuntimeError(f"esi {' '.join(command)} --help failed: {result.output}")
        return "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")

    group = typer.main.get_command(cli_app)
    names = list(getattr(group, "commands", {}))
    lines = [
        "# The `esi` command",
        "",
        "Generated from the typer commands of `esi.client.cli` (`esi --help`). `pip install esi` installs it; in a",
        "checkout it is `.venv/bin/esi`. `ESI_URL`, `ESI_TOKEN` and `ESI_NAMESPACE` (or `--url`, `--token`, `-n`)",
        "say where the API is; `make up` prints them.",
        "",
        "```text",
        helped(),
        "```",
        "",
    ]
    for name in names:
        lines += [f"## esi {name}", "", "```text", helped(name), "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- config


class _RecordingConfig:
    """Stands in for ``pulumi.Config("esi")``: every key read is recorded with its getter; nothing is set."""

    def __init__(self) -> None:
        self.read: dict[str, str] = {}

    def __getattr__(self, getter: str) -> Callable[..., None]:
        def get(key: str, *_: object) -> None:
            self.read.setdefault(key, getter.removeprefix("get_").removeprefix("get") or "string")

        return get


def _program_keys() -> dict[str, str]:
    """Keys the Pulumi program reads itself (it runs on import, so its source is read, not imported)."""
    spec = importlib.util.find_spec(INFRA_PROGRAM)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{INFRA_PROGRAM} not found")
    keys: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "config"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.setdefault(
                str(node.args[0].value), node.func.attr.removeprefix("get_").removeprefix("get") or "string"
            )
    return keys


def _default(settings: object, key: str) -> str:
    """The default the stack takes when ``key`` is unset, where it is a plain value."""
    fields = {f.name.replace("_", ""): getattr(settings, f.name) for f in dataclasses.fields(settings)}  # type: ignore[arg-type]
    value = fields.get(key.lower())
    if isinstance(value, str) and value.startswith(str(REPO_ROOT)):
        value = str(Path(value).relative_to(REPO_ROOT))
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return f"`{json.dumps(list(value))}`" if value else "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | int | float):
        return f"`{value}`"
    return "—"


def config_page() -> str:
    stacks: dict[str, tuple[dict[str, str], object]] = {}
    for stack, target in INFRA_STACKS.items():
        module, name = target.split(":")
        recorder = _RecordingConfig()
        settings = getattr(importlib.import_module(module), name).from_config(recorder)
        stacks[stack] = (recorder.read, settings)
    program = _program_keys()
    every = set(program) | {key for read, _ in stacks.values() for key in read}
    unexplained, unread = every - set(CONFIG_KEYS), set(CONFIG_KEYS) - every
    if unexplained or unread:
        raise RuntimeError(
            f"docs/hooks/reference.py CONFIG_KEYS: explain {sorted(unexplained)}; no stack reads {sorted(unread)}"
        )
    lines = [
        "# Stack configuration (`esi:` keys)",
        "",
        "Generated from the code that reads them: the Pulumi program and each stack's settings (`from_config`).",
        "Set a key with `pulumi config set -s <stack> esi:<key> <value>` (`--path` for a part of a map), or in",
        "`Pulumi.<stack>.yaml`; `make up` runs the `local` stack. Defaults are the code's, used when a key is unset.",
        "",
    ]
    settled = {key for read, _ in stacks.values() for key in read}
    for stack, (read, settings) in stacks.items():
        # The program's own keys apply to every stack, but those some stack's settings read belong to that stack.
        keys = {**{k: v for k, v in program.items() if k not in settled}, **read}
        lines += [
            f"## `{stack}` stack",
            "",
            f"Committed settings: `Pulumi.{stack}.yaml`.",
            "",
            "| key | value | default | what it is |",
            "|---|---|---|---|",
        ]
        for key in sorted(keys, key=str.lower):
            lines.append(f"| `esi:{key}` | {keys[key]} | {_default(settings, key)} | {CONFIG_KEYS[key]} |")
        lines.append("")
    return "\n".join(lines)


PAGES: Mapping[str, Callable[[], str]] = {
    "reference/rest-api.md": rest_api_page,
    "reference/crds.md": crds_page,
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
}

__all__: Sequence[str] = ["PAGES", "on_files"]
