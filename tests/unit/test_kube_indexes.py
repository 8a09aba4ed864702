"""Typed kopf indexes (kube.indexes): each handle reads the index kopf fills under its function's name."""

from __future__ import annotations

import asyncio
import inspect
from types import ModuleType
from typing import Any

import kopf

import operators.batchjob
import operators.daemons
import operators.scheduling
import operators.testbed
import sim.controller
from esi.decisions.testbed_lifecycle import Reservation
from esi.resources.testbed import Testbed
from kube.indexes import KopfIndex
from tests.manifests import batchjob_manifest, testbed_manifest

SHELLS = (operators.daemons, operators.testbed, operators.scheduling, operators.batchjob, sim.controller)


def handles(module: ModuleType) -> list[KopfIndex[Any, Any]]:
    return [value for value in vars(module).values() if isinstance(value, KopfIndex)]


def test_every_handle_names_an_index_kopf_fills() -> None:
    registered = {handler.id for handler in kopf.get_default_registry()._indexing.get_all_handlers()}
    named = {handle.name for module in SHELLS for handle in handles(module)}

    assert {"holds", "testbed_tables", "reservations", "sim_pods"} <= named
    assert named <= registered


def test_a_handle_reads_its_own_index_among_the_handlers_arguments() -> None:
    tables: Any = {("ns", "tb"): ["table"]}
    holds: Any = {}
    passed = {"testbed_tables": tables, "holds": holds, "logger": None}

    assert operators.scheduling.testbed_tables.of(passed) is tables
    assert operators.daemons.holds.of(passed) is holds


def test_kopf_calls_every_index_in_its_event_loop_not_a_thread() -> None:
    indexing = kopf.get_default_registry()._indexing.get_all_handlers()

    assert indexing
    assert all(inspect.iscoroutinefunction(handler.fn) for handler in indexing)


def test_an_index_registered_by_kopf_answers_what_its_function_answers() -> None:
    handler = next(h for h in kopf.get_default_registry()._indexing.get_all_handlers() if h.id == "reservations")
    status = {
        "jobs": [
            {"name": "job-a", "state": "Reserved", "slots": [3, 4]},
            {"name": "job-b", "state": "Running", "slots": [5]},
            {"name": "job-c", "state": "Succeeded", "slots": [6]},
        ]
    }
    fn: Any = handler.fn

    found = asyncio.run(fn(name="s", namespace="ns", spec={"testbed": {"name": "tb"}}, status=status))

    assert found == {("ns", "tb"): (Reservation("s", "job-a", (3, 4)), Reservation("s", "job-b", (5,), started=True))}


def test_a_batchjob_esis_model_refuses_is_indexed_with_why_and_a_scheduling_naming_it_is_told() -> None:
    # Stored before its CRD had the rule: no driver account, so no run of it could start in any slot.
    legacy = batchjob_manifest()
    del legacy["spec"]["sparkSpec"]["driver"]
    handler = next(h for h in kopf.get_default_registry()._indexing.get_all_handlers() if h.id == "batchjob_specs")
    fn: Any = handler.fn
    specs = {
        **asyncio.run(fn(name="legacy", namespace="ns", meta={"name": "legacy"}, spec=legacy["spec"])),
        **asyncio.run(fn(name="fine", namespace="ns", meta={"name": "fine"}, spec=batchjob_manifest()["spec"])),
    }
    indexes: dict[str, Any] = {name: {} for name in ("testbed_tables", "batchjob_states", "holds", "scheduling_needs")}
    caches = operators.scheduling._Caches.of(indexes | {"batchjob_specs": {k: [v] for k, v in specs.items()}})

    unrunnable = caches.unrunnable(
        "ns", ["legacy", "fine", "not-there-yet"], "tb", Testbed.model_validate(testbed_manifest()).spec
    )

    assert list(unrunnable) == ["legacy"]
    assert unrunnable["legacy"].startswith("it is not valid: spec.sparkSpec.driver.serviceAccount: set driver.")
