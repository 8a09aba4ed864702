"""What both applications (the API and the extender) refuse before a route runs, in esi's one error shape
(``esi.wire.rest.ErrorBody``): Starlette's own refusals — 404 for a path no route has, 405 with every method
the path has in ``Allow``, 400 for a body that cannot be decoded — and bodies over the app's limit (413).

How much a request may carry: a body over its app's limit is refused with 413 stating the limit, read no
further than the limit.
``API_BODY_LIMIT``: the external scheduler API takes bodies up to 2 MiB — more than any object the API server
stores (etcd's limit is 1.5 MiB), so nothing that could succeed is refused, and nothing is sent on that the API
server would refuse as esi's fault. ``EXTENDER_BODY_LIMIT``: the extender takes up to 16 MiB, room for a
scheduler that sends whole nodes and pods instead of their names.
"""

from __future__ import annotations

import json
from typing import Any, Final

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from esi.wire.rest import ApiError, ErrorBody

__all__ = ["API_BODY_LIMIT", "EXTENDER_BODY_LIMIT", "HTTP_METHODS", "BodyLimit", "guard", "too_large"]

HTTP_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
MIB: Final = 1024 * 1024
API_BODY_LIMIT: Final = 2 * MIB
EXTENDER_BODY_LIMIT: Final = 16 * MIB


def too_large(limit: int) -> ErrorBody:
    size = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit:,} bytes"
    return ErrorBody(detail=ApiError(message=f"the request body is larger than this server takes: at most {size}"))


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes is answered 413. One that says its length
    is refused before anything is read; one that does not, as soon as what it sent passes the limit (the
    route reading it is stopped by an ``HTTPException``, which the app answers in its error shape)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self._limit:
            await self._refuse(send)
            return
        received = 0

        async def receiving() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self._limit:
                raise HTTPException(413, detail=too_large(self._limit).detail.model_dump(mode="json"))
            return message

        await self._app(scope, receiving, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(too_large(self._limit).model_dump(mode="json")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's ``HTTPException`` in esi's shape: its detail is a sentence, or esi's ``ApiError`` already."""
    assert isinstance(exc, StarletteHTTPException)
    detail: Any = exc.detail
    if not (isinstance(detail, dict) and "message" in detail):
        what = f"{exc.detail}: {request.method} {request.url.path}"
        errors = [{"field": "(body)", "problem": str(exc.detail)}] if exc.status_code == 400 else []
        detail = ApiError.model_validate({"message": what, "errors": errors}).model_dump(mode="json")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_methods(request))
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


def _methods(request: Request) -> list[str]:
    """Every method the request's path has, over all routes (Starlette names those of one route only)."""
    routes = request.app.router.routes
    return [
        method
        for method in sorted(HTTP_METHODS)
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]


def guard(app: FastAPI, limit: int) -> None:
    """Have ``app`` refuse bodies over ``limit`` bytes, and answer Starlette's own refusals in esi's shape; its
    OpenAPI description says so on every operation that takes a body."""
    app.add_middleware(BodyLimit, limit=limit)
    app.add_exception_handler(StarletteHTTPException, _refused)
    _describe(app, limit)


_ERROR_REF: Final = "#/components/schemas/{model}"


def _describe(app: FastAPI, limit: int) -> None:
    """Add the door's refusals of a body (400 not decodable, 413 too large) to each operation that takes one."""
    plain = app.openapi
    refusals = {
        "400": "The body is not JSON (or not the media type it is declared as)",
        "413": too_large(limit).detail.message,
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            described = plain()
            _, schemas = models_json_schema([(ErrorBody, "serialization")], ref_template=_ERROR_REF)
            known = described.setdefault("components", {}).setdefault("schemas", {})
            for name, schema in schemas.get("$defs", {}).items():
                known.setdefault(name, schema)
            body = {"application/json": {"schema": {"$ref": _ERROR_REF.format(model=ErrorBody.__name__)}}}
            for path in described.get("paths", {}).values():
                for operation in path.values():
                    if isinstance(operation, dict) and "requestBody" in operation:
                        responses = operation.setdefault("responses", {})
                        for code, meaning in refusals.items():
                            responses.setdefault(code, {"description": meaning, "content": body})
            app.openapi_schema = described
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
