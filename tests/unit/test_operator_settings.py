"""What the operators set in kopf at start-up: a diff base only for the kinds kopf runs change handlers for."""

from __future__ import annotations

from typing import Any, cast

import kopf

from esi.resources.crds import DEFINITIONS
from esi.resources.meta import GROUP
from operators import batchjob, scheduling, testbed
from operators.daemons import CHANGE_HANDLED_KINDS, ChangeHandledDiffBase

SHELLS = (batchjob, scheduling, testbed)  # imported: their handlers are registered with kopf


def _body(kind: str) -> kopf.Body:
    raw: dict[str, Any] = {
        "apiVersion": "v1" if kind == "Pod" else f"{GROUP}/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "labels": {"a": "b"}, "resourceVersion": "7"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    return kopf.Body(cast(kopf.RawBody, raw))


def test_every_kind_with_a_change_handler_keeps_its_diff_base() -> None:
    kinds = {d.plural: d.kind for d in DEFINITIONS}
    selectors: list[Any] = [h.selector for h in kopf.get_default_registry()._changing.get_all_handlers()]
    handled = {selector.any_name or selector.plural for selector in selectors}

    assert handled
    assert {kinds[plural] for plural in handled} == CHANGE_HANDLED_KINDS


def test_a_change_handled_kind_gets_kopfs_own_essence() -> None:
    storage = ChangeHandledDiffBase(prefix=GROUP)
    body = _body("Scheduling")

    assert storage.build(body=body) == kopf.AnnotationsDiffBaseStorage(prefix=GROUP).build(body=body)
    assert storage.build(body=body)["spec"] == {"nodeName": "n1"}


def test_any_other_kind_gets_an_empty_essence_without_copying_the_object() -> None:
    storage = ChangeHandledDiffBase(prefix=GROUP)

    assert storage.build(body=_body("Pod")) == {}
    assert storage.build(body=_body("Testbed")) == {}
