"""The CRDs are generated from the models, structurally sound, and the committed YAML matches them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from esi.resources.crds import DEFINITIONS, CrdDefinition, crd
from infra.stacks import crds as crd_files


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


def schema_of(definition: CrdDefinition) -> dict[str, Any]:
    return crd(definition)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def test_committed_crds_match_the_models() -> None:
    stale = [p.name for p, text in crd_files.rendered().items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"crds/ drifted from esi/ models, run `make crds`: {stale}"


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.kind)
def test_every_schema_node_is_structural(definition: CrdDefinition) -> None:
    for path, node in nodes(schema_of(definition)):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        assert "$ref" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.kind)
def test_names_columns_and_status_subresource(definition: CrdDefinition) -> None:
    manifest = crd(definition)
    names = manifest["spec"]["names"]
    version = manifest["spec"]["versions"][0]

    assert manifest["metadata"]["name"] == f"{definition.plural}.esi.tu-berlin.de"
    assert names.get("categories", []) == (["esi"] if definition.kind != "Run" else []), "not 100,000 Runs"
    assert names["shortNames"] == [definition.short_name]
    assert version.get("subresources") == ({"status": {}} if definition.status is not None else None)
    assert version["name"] == "v1alpha1"
    assert [c["name"] for c in version["additionalPrinterColumns"]][-1] == "Age"


def test_printer_columns_point_at_fields_the_status_has() -> None:
    for definition in DEFINITIONS:
        schema = schema_of(definition)
        for column in crd(definition)["spec"]["versions"][0]["additionalPrinterColumns"]:
            path = column["jsonPath"].lstrip(".").split(".")
            if path[0] == "metadata":
                continue
            node = schema
            for part in path:
                assert part in node.get("properties", {}), f"{definition.kind}: {column['jsonPath']} does not exist"
                node = node["properties"][part]


def test_cross_field_rules_are_cel_validations() -> None:
    by_kind = {d.kind: schema_of(d) for d in DEFINITIONS}
    rules = {
        kind: [r["rule"] for _, n in nodes(schema) for r in n.get("x-kubernetes-validations", [])]
        for kind, schema in by_kind.items()
    }

    assert "has(self.sparkSpec) != has(self.flinkSpec)" in rules["BatchJob"]
    assert "has(self.queueBased) != has(self.slotBased)" in rules["Scheduling"]
    assert "self == oldSelf" in rules["Run"], "a run's record is never changed"
    assert any("exists_one" in r for r in rules["Scheduling"])
    assert any("isGreaterThan" in r for r in rules["Testbed"])
    slot_ids = by_kind["Scheduling"]["properties"]["spec"]["properties"]["slotBased"]["properties"]["jobs"]["items"]
    assert slot_ids["properties"]["slotIds"]["x-kubernetes-list-type"] == "set"


def test_status_schemas_carry_no_defaults() -> None:
    # Defaults in a status schema would be applied by the API server, a second writer of the status.
    for definition in DEFINITIONS:
        status = schema_of(definition)["properties"].get("status", {})
        assert all("default" not in node for _, node in nodes(status)), definition.kind


def test_the_slot_table_is_one_value_to_the_api_server() -> None:
    # Replaced whole by its one writer; as a keyed list the API server would track each row in managedFields.
    testbed = schema_of(next(d for d in DEFINITIONS if d.kind == "Testbed"))
    slots = testbed["properties"]["status"]["properties"]["slots"]
    assert slots["x-kubernetes-list-type"] == "atomic"
    assert "x-kubernetes-list-map-keys" not in slots
