"""kube.pod_writes: what it sends, how a refusal reaches the caller, and a rotated token renewed on 401.

The writes themselves against a real API server: tests/integration/test_extender_placement.py (the bind
verb). Here a small HTTP server stands in for the API server's door only: the requests as sent, and
answers the test chooses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from lightkube import ApiError, KubeConfig

from kube.errors import Refusal, refusal
from kube.pod_writes import PodWriteFailed, PodWrites, _proxy_for

Answer = Callable[[web.Request, bytes], web.Response]


@asynccontextmanager
async def door(answer: Answer) -> AsyncIterator[tuple[str, list[tuple[str, str, str | None, Any]]]]:
    """An HTTP server on a free loopback port answering every request with ``answer``; yields its URL and the
    requests it got (method, path, Authorization header, JSON body)."""
    seen: list[tuple[str, str, str | None, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.method, request.path, request.headers.get("Authorization"), json.loads(body)))
        return answer(request, body)

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def config(server: str, user: dict[str, Any]) -> KubeConfig:
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


def status(code: int, message: str) -> web.Response:
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "message": message}
    return web.json_response(body, status=code)


def test_a_binding_and_a_deletion_are_sent_as_the_api_server_reads_them() -> None:
    async def run() -> list[tuple[str, str, str | None, Any]]:
        async with door(lambda _r, _b: web.json_response({"kind": "Status", "status": "Success"})) as (url, seen):
            async with PodWrites(config(url, {"token": "t0k3n"})) as writes:
                await writes.delete_exactly("ns", "ghost-1", uid="g-uid")
                await writes.delete_exactly("ns", "ghost-2", uid=None)
                await writes.bind("ns", "exec-1", uid="e-uid", node="n1", annotations={"esi.tu-berlin.de/slot": "3"})
                await writes.bind("ns", "other", uid=None, node="n2", annotations={})
            return seen

    seen = asyncio.run(run())
    assert [(method, path, auth) for method, path, auth, _ in seen] == [
        ("DELETE", "/api/v1/namespaces/ns/pods/ghost-1", "Bearer t0k3n"),
        ("DELETE", "/api/v1/namespaces/ns/pods/ghost-2", "Bearer t0k3n"),
        ("POST", "/api/v1/namespaces/ns/pods/exec-1/binding", "Bearer t0k3n"),
        ("POST", "/api/v1/namespaces/ns/pods/other/binding", "Bearer t0k3n"),
    ]
    bodies = [body for *_, body in seen]
    assert bodies[0] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "g-uid"},
    }
    assert "preconditions" not in bodies[1]
    assert bodies[2] == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": "exec-1",
            "namespace": "ns",
            "uid": "e-uid",
            "annotations": {"esi.tu-berlin.de/slot": "3"},
        },
        "target": {"kind": "Node", "name": "n1"},
    }
    assert bodies[3]["metadata"] == {"name": "other", "namespace": "ns"}


@pytest.mark.parametrize(
    ("answer", "meaning", "message"),
    [
        (status(409, "Precondition failed: UID in precondition: g-uid"), Refusal.CONFLICT, "Precondition failed"),
        (status(404, 'pods "ghost-1" not found'), Refusal.NOT_FOUND, "not found"),
        (web.Response(status=503, text="upstream unavailable"), Refusal.OTHER, "upstream unavailable"),
    ],
    ids=["conflict", "not-found", "not-a-status"],
)
def test_a_refusal_is_lightkubes_api_error_with_the_api_servers_status(
    answer: web.Response, meaning: Refusal, message: str
) -> None:
    async def run() -> ApiError:
        async with door(lambda _r, _b: answer) as (url, _):
            async with PodWrites(config(url, {"token": "t"})) as writes:
                with pytest.raises(ApiError) as raised:
                    await writes.delete_exactly("ns", "ghost-1", uid="g-uid")
            return raised.value

    err = asyncio.run(run())
    assert refusal(err) is meaning
    assert message in (err.status.message or "")


def test_a_rotated_token_is_read_again_when_the_api_server_answers_401(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old")

    def answer(request: web.Request, _: bytes) -> web.Response:
        if request.headers.get("Authorization") != "Bearer new":
            token_file.write_text("new")  # rotated meanwhile, as a kubelet rotates a service account's token
            return status(401, "Unauthorized")
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def run() -> list[str | None]:
        async with door(answer) as (url, seen):
            async with PodWrites(config(url, {"tokenFile": str(token_file)})) as writes:
                await writes.bind("ns", "exec-1", uid=None, node="n1", annotations={})
                await writes.bind("ns", "exec-2", uid=None, node="n1", annotations={})
            return [auth for _, _, auth, _ in seen]

    assert asyncio.run(run()) == ["Bearer old", "Bearer new", "Bearer new"]


def test_an_api_server_out_of_reach_is_a_failed_write_not_a_refusal() -> None:
    async def run() -> None:
        async with door(lambda _r, _b: status(500, "unused")) as (url, _):
            pass  # closed again: nothing listens there now
        async with PodWrites(config(url, {"token": "t"})) as writes:
            await writes.bind("ns", "exec-1", uid=None, node="n1", annotations={})

    with pytest.raises(PodWriteFailed, match=r"^POST http://127\.0\.0\.1:\d+/api/v1/namespaces/ns/pods/exec-1/binding"):
        asyncio.run(run())


def test_the_environments_proxy_is_used_unless_the_server_is_exempt(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _proxy_for("https://api.example:6443") == "http://proxy.example:3128"
    assert _proxy_for("http://api.example:8080") is None  # no HTTP_PROXY
    monkeypatch.setenv("NO_PROXY", "api.example,10.0.0.0/8")
    assert _proxy_for("https://api.example:6443") is None


@pytest.mark.parametrize(("namespace", "name"), [("ns", "../../nodes/n1"), ("ns", ".."), ("a/b", "p"), ("ns", "p?x=1")])
def test_a_name_that_is_no_object_name_is_refused_before_anything_is_sent(namespace: str, name: str) -> None:
    async def run() -> list[tuple[str, str, str | None, Any]]:
        async with door(lambda _r, _b: web.json_response({"kind": "Status", "status": "Success"})) as (url, seen):
            async with PodWrites(config(url, {"token": "t"})) as writes:
                with pytest.raises(PodWriteFailed, match="not a"):
                    await writes.delete_exactly(namespace, name, uid=None)
                with pytest.raises(PodWriteFailed, match="not a"):
                    await writes.bind(namespace, name, uid=None, node="n1", annotations={})
            return seen

    assert asyncio.run(run()) == []
