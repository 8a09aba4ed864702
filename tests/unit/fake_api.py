"""The esi API and its STOMP subscriptions as fakes, and the data they serve in the API's wire shapes: what the
client's and the CLI's tests talk to instead of the network."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from esi.wire.stomp_frames import Message

__all__ = [
    "Answer",
    "FakeApi",
    "FakeStomp",
    "FakeSubscription",
    "message",
    "refusal",
    "wire_job",
    "wire_overview",
    "wire_scheduling",
    "wire_slot",
    "wire_testbed",
]


# ---------------------------------------------------------------------------------------------- wire data


def wire_slot(slot_id: int, node: int, position: int, state: str = "FREE", job: str | None = None) -> dict[str, Any]:
    return {"state": state, "podName": f"pod-{slot_id}", "podUId": None, "nodeName": f"node-{node}", "nodeId": node,
            "slotPositionOnNode": position, "position": slot_id, "reservedFor": job}  # fmt: skip


def wire_testbed(name: str = "tb", nodes: int = 2, per_node: int = 2, **more: Any) -> dict[str, Any]:
    """A Testbed as the API sends it, with the interleaved ids: slot id = position x nodes + node."""
    slots = {f"node-{n}": [wire_slot(p * nodes + n, n, p) for p in range(per_node)] for n in range(nodes)}
    return {"name": name, "namespace": "team", "state": "SUCCESS", "esiState": "Ready", "numberOfNodes": nodes,
            "numberOfSlotsPerNode": per_node, "slotsByNode": slots, "heldBy": None, "message": None} | more  # fmt: skip


def wire_job(name: str = "wordcount", **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "team", "state": "ReadyState", "esiState": "Ready", "externalScheduler": None,
            "scheduledEvents": [], "message": None} | more  # fmt: skip


def wire_scheduling(name: str = "s1", state: str = "AcquireState", **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "team", "state": state, "esiState": "Pending", "jobStatus": [], "testBed": "tb",
            "queue": ["wordcount", "pagerank"], "slots": None, "waitingFor": None} | more  # fmt: skip


def wire_overview() -> dict[str, Any]:
    testbed = {"name": "tb", "state": "SUCCESS", "esiState": "Ready", "nodes": 2, "slots": 4, "free": 4, "reserved": 0,
               "occupied": 0, "heldBy": None}  # fmt: skip
    job = {"name": "wordcount", "state": "ReadyState", "esiState": "Ready", "heldBy": None, "runs": 0,
           "lastRunSuccessful": None}  # fmt: skip
    scheduling = {"name": "s1", "state": "AcquireState", "esiState": "Pending", "testBed": "tb", "progress": None,
                  "waitingFor": "the Testbed"}  # fmt: skip
    return {"namespace": "team", "testbeds": [testbed], "jobs": [job], "schedulings": [scheduling]}


def refusal(message: str, *errors: tuple[str, str]) -> dict[str, Any]:
    return {"detail": {"message": message, "errors": [{"field": f, "problem": p} for f, p in errors]}}


# ---------------------------------------------------------------------------------------------- fakes


Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]


@dataclass
class FakeApi:
    """The esi API as a table of (method, path) → answer; records every request it gets."""

    routes: dict[tuple[str, str], Answer] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def answer(self, method: str, path: str, status: int = 200, body: Any = None) -> FakeApi:
        self.routes[(method, path)] = httpx.Response(status, json=body)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(404, json=refusal(f"no route {request.method} {request.url.path}"))
        return answer(request) if callable(answer) else answer

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self) -> Any:
        return json.loads(self.last.content)


def message(destination: str, action: str, resource: Any) -> Message:
    body = json.dumps({"action": action, "resource": resource}).encode()
    return Message(destination=destination, subscription="0", message_id="m", headers={}, body=body)


class FakeSubscription:
    """Serves canned messages, then ends (the server closed), raises ``then`` (e.g. Ctrl-C) or, async and
    ``quiet``, waits for a message that never comes."""

    def __init__(self, messages: Iterable[Message], then: BaseException | None = None, quiet: bool = False) -> None:
        self._messages = deque(messages)
        self._then = then
        self._quiet = quiet

    def __iter__(self) -> Iterator[Message]:
        while self._messages:
            yield self._messages.popleft()
        if self._then is not None:
            raise self._then

    def next(self, timeout: float, /) -> Message | None:
        # Empty means "nothing came within timeout": the wait gives up at once, no clock involved.
        return self._messages.popleft() if self._messages else None

    async def __aiter__(self) -> AsyncIterator[Message]:
        for item in self:
            yield item
        if self._quiet:
            await asyncio.Event().wait()


@dataclass
class FakeStomp:
    """Stands in for ``esi.client.subscriber``: records each subscription, serves the canned messages."""

    messages: list[Message] = field(default_factory=list)
    then: BaseException | None = None
    quiet: bool = False
    refuse: BaseException | None = None
    subscriptions: list[dict[str, Any]] = field(default_factory=list)

    def _open(self, url: str, destinations: Sequence[str], options: dict[str, Any]) -> FakeSubscription:
        self.subscriptions.append({"url": url, "destinations": list(destinations)} | options)
        if self.refuse is not None:
            raise self.refuse
        return FakeSubscription(self.messages, self.then, self.quiet)

    @contextmanager
    def subscribe(
        self,
        url: str,
        destinations: Sequence[str],
        *,
        token: str | None = None,
        namespace: str | None = None,
        view: str | None = None,
        connect_timeout: float = 10,
    ) -> Iterator[FakeSubscription]:
        yield self._open(url, destinations, {"token": token, "namespace": namespace, "view": view})

    @asynccontextmanager
    async def asubscribe(
        self,
        url: str,
        destinations: Sequence[str],
        *,
        token: str | None = None,
        namespace: str | None = None,
        view: str | None = None,
        connect_timeout: float = 10,
    ) -> AsyncIterator[FakeSubscription]:
        yield self._open(url, destinations, {"token": token, "namespace": namespace, "view": view})
