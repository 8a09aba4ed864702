"""kube.clients: esi's lightkube clients keep an idle connection to the API server for ``IDLE_SECONDS``.

A small HTTP server stands in for the API server's door and tells the connections it was asked on apart; the
idle time between two requests is httpcore's clock moved on, not waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest
from aiohttp import web
from lightkube import KubeConfig
from lightkube.resources.core_v1 import Namespace

from kube.clients import IDLE_SECONDS, api_client
from tests import http_door


@asynccontextmanager
async def door() -> AsyncIterator[tuple[str, list[tuple[int, str | None]]]]:
    """An HTTP server answering every request with a Namespace; yields its URL and, for every request, the
    client's port (one per connection) and the Authorization header."""
    seen: list[tuple[int, str | None]] = []

    async def handle(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        seen.append((peer[1] if peer else -1, request.headers.get("Authorization")))
        return web.json_response({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "esi"}})

    async with http_door.door(handle) as url:
        yield url, seen


def config(server: str) -> KubeConfig:
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "t0k3n"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "esi"}}],
            "current-context": "x",
        }
    )


def connections_for_two_requests(monkeypatch: pytest.MonkeyPatch, idle: float) -> int:
    """How many connections two GETs ``idle`` seconds apart took (httpcore's clock moved on between them)."""
    offset = [0.0]
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() + offset[0])  # httpcore's alone, not the loop's
    monkeypatch.setattr("httpcore2._async.http11.time", clock)

    async def run() -> list[int]:
        async with door() as (url, seen):
            client = api_client(config(url), field_manager="esi-test")
            try:
                first = await client.get(Namespace, "esi")
                assert first.metadata is not None
                assert first.metadata.name == "esi"
                offset[0] = idle
                await client.get(Namespace, "esi")
            finally:
                await client.close()
            return [port for port, _ in seen]

    ports = asyncio.run(run())
    assert len(ports) == 2
    return len(set(ports))


def test_a_connection_idle_for_less_than_idle_seconds_is_used_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx alone would have closed it after 5 s
    assert connections_for_two_requests(monkeypatch, IDLE_SECONDS - 10) == 1


def test_a_connection_idle_for_longer_is_closed_and_a_new_one_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    assert connections_for_two_requests(monkeypatch, IDLE_SECONDS + 10) == 2


def test_the_client_keeps_the_kubeconfigs_namespace_and_sends_its_credentials() -> None:
    async def run() -> tuple[str, list[str | None]]:
        async with door() as (url, seen):
            client = api_client(config(url))
            try:
                await client.get(Namespace, "esi")
            finally:
                await client.close()
            return client.namespace, [authorization for _, authorization in seen]

    assert asyncio.run(run()) == ("esi", ["Bearer t0k3n"])
