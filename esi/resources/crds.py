"""CustomResourceDefinitions of BatchJob, Testbed, Scheduling and Run, generated from the pydantic models.

The models are the single source of truth: ``crd(definition)`` turns a model's JSON Schema into the
*structural* OpenAPI schema the API server requires — references inlined, optionals as plain properties,
open third-party specs marked ``x-kubernetes-preserve-unknown-fields`` — and adds what only a CRD has:
names, printer columns, the status subresource (for a resource with a status) and the CEL rules each model
declares in ``cel_rules``.
``infra/stacks/crds.py`` writes them to ``crds/``; a test fails when the committed YAML drifts from the models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from esi.resources.batchjob import BatchJobSpec, BatchJobStatus
from esi.resources.meta import GROUP, VERSION, part_of_esi
from esi.resources.run import RunSpec
from esi.resources.scheduling import SchedulingSpec, SchedulingStatus
from esi.resources.testbed import TestbedSpec, TestbedStatus

__all__ = ["DEFINITIONS", "CrdDefinition", "crd", "structural_schema"]

CATEGORY = "esi"


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""

    def to_json(self) -> dict[str, str]:
        column = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        return column


@dataclass(frozen=True)
class CrdDefinition:
    kind: str
    plural: str
    short_name: str
    spec: type[BaseModel]
    status: type[BaseModel] | None  # None: an object without status, written whole once (a Run)
    columns: tuple[PrinterColumn, ...]
    categories: tuple[str, ...] = (CATEGORY,)  # `kubectl get esi` lists them; not Runs, of which there are many

    @property
    def name(self) -> str:
        return f"{self.plural}.{GROUP}"


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")

DEFINITIONS: tuple[CrdDefinition, ...] = (
    CrdDefinition(
        "BatchJob",
        "batchjobs",
        "bj",
        BatchJobSpec,
        BatchJobStatus,
        (
            PrinterColumn("State", ".status.state"),
            PrinterColumn("Scheduling", ".status.scheduling", description="The Scheduling holding the job"),
            PrinterColumn("Runs", ".status.runCount", "integer"),
            PrinterColumn("Waiting for", ".status.waitingFor", description="What holds its run up"),
            AGE,
        ),
    ),
    CrdDefinition(
        "Testbed",
        "testbeds",
        "tb",
        TestbedSpec,
        TestbedStatus,
        (
            PrinterColumn("Nodes", ".status.counts.nodes", "integer"),
            PrinterColumn("Slots", ".status.counts.slots", "integer"),
            PrinterColumn("Free", ".status.counts.free", "integer"),
            PrinterColumn("State", ".status.state"),
            PrinterColumn("Scheduling", ".status.scheduling", description="The Scheduling holding the Testbed"),
            AGE,
        ),
    ),
    CrdDefinition(
        "Scheduling",
        "schedulings",
        "sched",
        SchedulingSpec,
        SchedulingStatus,
        (
            PrinterColumn("State", ".status.state"),
            PrinterColumn("Testbed", ".status.testbed", description="The Testbed its jobs run in"),
            PrinterColumn("Progress", ".status.progress", description="Finished jobs / all jobs"),
            PrinterColumn("Waiting for", ".status.waitingFor", description="What it waits for", type="string"),
            AGE,
        ),
    ),
    CrdDefinition(
        "Run",
        "runs",
        "run",
        RunSpec,
        None,
        (
            PrinterColumn("Job", ".spec.job"),
            PrinterColumn("Scheduling", ".spec.scheduling", description="The Scheduling it ran for"),
            PrinterColumn("Testbed", ".spec.testbed", description="The Testbed it ran in"),
            PrinterColumn("Outcome", ".spec.outcome"),
            PrinterColumn("Started", ".spec.start", "date"),
            PrinterColumn("Runtime", ".spec.runtimeSeconds", "number", description="Seconds from start to end"),
            AGE,
        ),
        categories=(),
    ),
)


class SchemaError(ValueError):
    """A model uses a JSON Schema construct that has no structural equivalent."""


def structural_schema(model: type[BaseModel], *, keep_defaults: bool) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (defaults kept only where asked: spec, not status)."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return _convert(schema, schema.get("$defs", {}), keep_defaults=keep_defaults, path=model.__name__)


_DROPPED = {"title", "$defs", "discriminator"}
_KEPT = {
    "type", "format", "description", "enum", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "required",
    "nullable", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-validations", "x-kubernetes-map-type",
}  # fmt: skip


def _convert(node: Mapping[str, Any], defs: Mapping[str, Any], *, keep_defaults: bool, path: str) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs, keep_defaults=keep_defaults, path=path)
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise SchemaError(f"{path}: a union of {len(options)} types has no structural schema")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return _convert({**options[0], **rest}, defs, keep_defaults=keep_defaults, path=path)

    def sub(schema: Mapping[str, Any], suffix: str) -> dict[str, Any]:
        return _convert(schema, defs, keep_defaults=keep_defaults, path=path + suffix)

    converters: dict[str, Callable[[Any], dict[str, Any]]] = {
        "properties": lambda props: {"properties": {name: sub(schema, f".{name}") for name, schema in props.items()}},
        "items": lambda items: {"items": sub(items, "[]")},
        "additionalProperties": lambda extra: _additional_properties(extra, sub),
        "anyOf": lambda options: {"anyOf": [{"type": o["type"]} for o in options]},  # int-or-string only
        "const": lambda value: {"enum": [value]},
        "default": lambda value: (
            {"default": value} if keep_defaults and value is not None and not isinstance(value, dict | list) else {}
        ),
    }
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _KEPT:
            out[key] = value
        elif key in converters:
            out.update(converters[key](value))
        else:
            raise SchemaError(f"{path}: JSON Schema keyword {key!r} has no structural equivalent")
    _check_structural(out, path)
    return out


def _additional_properties(value: Any, sub: Callable[[Mapping[str, Any], str], dict[str, Any]]) -> dict[str, Any]:
    if value is True or value == {}:
        # An open object (a third-party spec, free-form data): the API server keeps unknown fields.
        return {"x-kubernetes-preserve-unknown-fields": True}
    if value is False:
        return {}
    return {"additionalProperties": sub(value, "{}")}


def _check_structural(out: dict[str, Any], path: str) -> None:
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        if not out.get("x-kubernetes-preserve-unknown-fields"):
            raise SchemaError(f"{path}: no type")
        out["type"] = "object"
    if out.get("type") == "object" and "properties" in out and "additionalProperties" in out:
        raise SchemaError(f"{path}: properties and additionalProperties cannot be combined")


def crd(definition: CrdDefinition) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one esi resource."""
    properties = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": structural_schema(definition.spec, keep_defaults=True),
    }
    if definition.status is not None:
        properties["status"] = structural_schema(definition.status, keep_defaults=False)
    schema = {
        "type": "object",
        "description": (definition.spec.__doc__ or definition.kind).strip().splitlines()[0],
        "required": ["spec"],
        "properties": properties,
    }
    version: dict[str, Any] = {"name": VERSION, "served": True, "storage": True}
    if definition.status is not None:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = [c.to_json() for c in definition.columns]
    version["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": definition.name, "labels": part_of_esi()},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": definition.kind,
                "listKind": f"{definition.kind}List",
                "plural": definition.plural,
                "singular": definition.kind.lower(),
                "shortNames": [definition.short_name],
                **({"categories": list(definition.categories)} if definition.categories else {}),
            },
            "versions": [version],
        },
    }
