"""Prometheus metrics of the API process, served at ``/metrics`` (no token needed, like health).

* ``esi_api_request_duration_seconds{method,route,status}`` — the external API, by route template;
* ``esi_extender_request_duration_seconds{method,route,status}`` — the scheduler extender's verbs;
* ``esi_testbed_slots{namespace,testbed,state}`` — slot occupancy, from the watch cache at scrape time;
* ``esi_scheduling_jobs{namespace,scheduling,state}`` and ``esi_scheduling_queue_length{namespace,scheduling}``
  (jobs not started yet) — the queues, likewise;
* ``esi_stomp_*`` — sessions, messages, slow consumers (``api.stomp``).

Gauges of the cluster are computed when scraped, from what the cache holds, so they can never drift from it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Final

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.cache import ResourceCache
from api.door import HTTP_METHODS
from api.logs import access
from esi.resources.scheduling import JobState
from esi.resources.testbed import SlotState

__all__ = [
    "API_LATENCY",
    "CACHE_COLLECTOR",
    "EXTENDER_LATENCY",
    "CacheCollector",
    "Exposition",
    "RequestObserver",
    "measure",
    "metrics_route",
]

_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
API_LATENCY: Final = Histogram(
    "esi_api_request_duration_seconds", "External API requests", ["method", "route", "status"], buckets=_BUCKETS
)
EXTENDER_LATENCY: Final = Histogram(
    "esi_extender_request_duration_seconds", "Scheduler extender calls", ["method", "route", "status"], buckets=_BUCKETS
)


# The label values of requests outside the routes: any method but HTTP's own, and any path no route has. A
# caller must not be able to add a series (each stays until the process ends) by making up a method or path.
OTHER_METHOD: Final = "other"
UNMATCHED: Final = "(unmatched)"


class RequestObserver:
    """ASGI middleware: times every HTTP request into ``histogram`` by method and route template, the labels
    bounded (``HTTP_METHODS``, ``UNMATCHED``), and, with ``log``, writes one access record per request
    (``api.logs.access``). Plain ASGI rather than Starlette's ``BaseHTTPMiddleware``, which costs a task and a
    queue per request."""

    def __init__(self, app: ASGIApp, histogram: Histogram, log: bool = False) -> None:
        self._app = app
        self._histogram = histogram
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - started
            template = getattr(scope.get("route"), "path", None)
            method = scope["method"] if scope["method"] in HTTP_METHODS else OTHER_METHOD
            self._histogram.labels(method, template or UNMATCHED, str(status)).observe(elapsed)
            if self._log:
                access(scope, template, status, elapsed)


def measure(app: FastAPI, histogram: Histogram, *, log: bool = False) -> None:
    app.add_middleware(RequestObserver, histogram=histogram, log=log)


class CacheCollector(Collector):
    """Slot occupancy and queue lengths, read at scrape time from the cache of the process's API app."""

    def __init__(self) -> None:
        self.cache: ResourceCache | None = None

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        if cache is None:
            return
        slots = GaugeMetricFamily("esi_testbed_slots", "Slots by state", labels=["namespace", "testbed", "state"])
        for testbed in cache.testbeds.everything():
            occupancy = Counter(slot.state for slot in (testbed.status.slots if testbed.status else []))
            for slot_state in SlotState:
                key = [testbed.metadata.namespace or "", testbed.metadata.name, slot_state.value]
                slots.add_metric(key, occupancy[slot_state])
        yield slots
        jobs = GaugeMetricFamily("esi_scheduling_jobs", "Jobs by state", labels=["namespace", "scheduling", "state"])
        queued = GaugeMetricFamily(
            "esi_scheduling_queue_length", "Jobs not started yet", labels=["namespace", "scheduling"]
        )
        for scheduling in cache.schedulings.everything():
            names = [scheduling.metadata.namespace or "", scheduling.metadata.name]
            progress = scheduling.status.jobs if scheduling.status else []
            counts = Counter(p.state for p in progress)
            for state in JobState:
                jobs.add_metric([*names, state.value], counts[state])
            queued.add_metric(names, sum(counts[s] for s in JobState if s.queued))
        yield jobs
        yield queued


class Exposition(Response):
    """Prometheus's text exposition format."""

    media_type = CONTENT_TYPE_LATEST


def metrics_route(app: FastAPI) -> None:
    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics in the text exposition format (no token needed)",
        response_class=Exposition,
    )
    async def metrics() -> Exposition:
        return Exposition(generate_latest(REGISTRY))


CACHE_COLLECTOR: Final = CacheCollector()
REGISTRY.register(CACHE_COLLECTOR)
