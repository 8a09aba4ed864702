"""Serve an ASGI app with uvicorn in a background thread on a free loopback port (tests, benchmarks).

The listening socket is created as TCP explicitly: asyncio enables TCP_NODELAY only on sockets whose
protocol is IPPROTO_TCP, and with a bare ``socket.socket()`` every response would wait ~40 ms for the
client's delayed ACK (Nagle). ``python -m api`` lets uvicorn bind, which gets this right by itself.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import uvicorn

__all__ = ["serve_in_thread"]


@contextlib.contextmanager
def serve_in_thread(app: Any, *, lifespan: Literal["on", "off"] = "off", timeout: float = 10) -> Iterator[str]:
    """Run ``app`` while the block runs; yields its base URL (``http://127.0.0.1:<port>``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
        sock.close()
        if thread.is_alive():
            raise RuntimeError("the app did not shut down")
