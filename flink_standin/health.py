"""The stand-in's health endpoint: ``GET <path>`` answers 200 once the stand-in has read its namespaces, 503
before; any other path 404. Plain HTTP/1.1 on asyncio, one answer per connection (what a probe or
``infra.stacks.local`` needs, nothing more)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HealthEndpoint", "answer", "serve"]


@dataclass(frozen=True)
class HealthEndpoint:
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, text: str) -> HealthEndpoint:
        """``http://HOST:PORT/PATH``; ValueError saying what is expected."""
        url = urlsplit(text)
        if url.scheme != "http" or not url.hostname or url.port is None:
            raise ValueError(f"expected http://HOST:PORT/PATH, not {text!r}")
        return cls(url.hostname, url.port, url.path or "/")


def answer(request_line: str, path: str, ready: bool) -> bytes:
    """The whole HTTP response to ``request_line`` (e.g. ``GET /healthz HTTP/1.1``)."""
    method, _, rest = request_line.partition(" ")
    target = rest.partition(" ")[0].partition("?")[0]
    if method not in ("GET", "HEAD") or target != path:
        status, body = "404 Not Found", "not found\n"
    elif ready:
        status, body = "200 OK", "ok\n"
    else:
        status, body = "503 Service Unavailable", "the namespaces were not read yet\n"
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return (head + (body if method != "HEAD" else "")).encode()


async def serve(endpoint: HealthEndpoint, ready: Callable[[], bool]) -> asyncio.Server:
    """Start answering at ``endpoint``; ``ready()`` is asked at each request."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await asyncio.wait_for(reader.readline(), 5)).decode("latin-1").strip()
            writer.write(answer(request_line, endpoint.path, ready()))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, endpoint.host, endpoint.port)
