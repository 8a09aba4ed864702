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
from kube.indexes import KopfIndex

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
