"""A kube-scheduler extender for tests: an HTTP server that records every call and answers by a rule.

It speaks the upstream wire format (k8s.io/kube-scheduler/extender/v1, Go-style capitalised keys) for a
scheduler configured with ``nodeCacheCapable: true``: filter gets and returns ``NodeNames``; preempt gets
``NodeNameToMetaVictims`` (victims by UID) and returns the subset it allows.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordingExtender:
    """Allows only ``allowed_nodes`` in filter and keeps only their victims in preempt."""

    allowed_nodes: set[str]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]

    def calls_for(self, verb: str, pod_name: str) -> list[dict[str, Any]]:
        return [body for v, body in self.calls if v == verb and body["Pod"]["metadata"]["name"] == pod_name]

    def answer(self, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        if verb == "filter":
            offered = body.get("NodeNames") or []
            return {
                "NodeNames": [n for n in offered if n in self.allowed_nodes],
                "FailedNodes": {n: "not the node this test allows" for n in offered if n not in self.allowed_nodes},
                "Error": "",
            }
        if verb == "preempt":
            victims = body.get("NodeNameToMetaVictims") or {}
            return {"NodeNameToMetaVictims": {n: v for n, v in victims.items() if n in self.allowed_nodes}}
        raise ValueError(verb)


@contextmanager
def serve(extender: RecordingExtender) -> Iterator[RecordingExtender]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            verb = self.path.rstrip("/").rsplit("/", 1)[-1]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            extender.calls.append((verb, body))
            try:
                payload, status = extender.answer(verb, body), 200
            except ValueError:
                payload, status = {"Error": f"unknown verb {verb}"}, 404
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    extender.url = f"http://127.0.0.1:{server.server_address[1]}/extender"
    try:
        yield extender
    finally:
        server.shutdown()
        server.server_close()
