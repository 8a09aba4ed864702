"""What the operators set in kopf at start-up: no diff base, since no kopf change handler of esi's reads one."""

from __future__ import annotations

from typing import Any, cast

import kopf

from esi.resources.meta import GROUP
from operators import batchjob, scheduling, testbed
from operators.daemons import NoDiffBase

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


def test_every_change_handler_is_an_on_delete_which_needs_no_diff_base() -> None:
    handlers = kopf.get_default_registry()._changing.get_all_handlers()

    assert handlers
    assert {handler.reason for handler in handlers} == {kopf.Reason.DELETE}


def test_an_object_seen_first_is_neither_new_to_kopf_nor_given_an_essence_to_store() -> None:
    storage = NoDiffBase()
    patch = kopf.Patch()
    for kind in ("Scheduling", "Testbed", "Pod"):
        body = _body(kind)
        # kopf takes an object whose fetched essence is None for new, and stores the built one onto it.
        assert storage.fetch(body=body) is not None
        assert storage.fetch(body=body) == storage.build(body=body) == {}
        storage.store(body=body, patch=patch, essence=storage.build(body=body))

    assert not patch
