"""Every dependency of every route runs in the event loop: FastAPI calls a plain function in a worker thread,
a hop per dependency per request (the extender's filter sits in the scheduler's one-pod-at-a-time cycle)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from api.app import create_api_app
from api.auth import StaticToken
from api.extender.app import create_extender_app


def _dependencies(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _dependencies(dependency)


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """The app's routes, those of included routers too."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _api_routes(included.routes)


def _runs_in_loop(call: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (FastAPI's security schemes)."""
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


def _apps() -> list[FastAPI]:
    return [create_api_app(StaticToken("t")), create_extender_app()]


@pytest.mark.parametrize("app", _apps(), ids=["api", "extender"])
def test_no_dependency_of_a_route_needs_a_worker_thread(app: FastAPI) -> None:
    routes = list(_api_routes(app.routes))
    calls = {(route.path, call) for route in routes for call in _dependencies(route.dependant)}

    assert routes
    assert any(path.startswith(("/external", "/extender")) for path, _ in calls)
    assert [(path, getattr(call, "__name__", call)) for path, call in calls if not _runs_in_loop(call)] == []
