"""How the API refuses: one JSON shape for every error, and the one place that maps errors to HTTP statuses.

Every refusal is ``{"detail": {"message": "...", "errors": [{"field": "...", "problem": "..."}]}}``
(``esi.wire.rest.ApiError``): a sentence a person can act on, and per-field problems where there are any.

=========================================  ======  ==================================================
raised                                      status  when
=========================================  ======  ==================================================
``Problem``                                 its own  a route's own refusal (404, 409, 422 …)
``RequestValidationError`` (FastAPI)        422     a body or parameter that does not fit the schema
``api.auth.Refusal``                        401/403 no or an unknown token / RBAC says no
``api.auth.AuthUnavailable``                503     the API server could not be asked who the caller is
``lightkube.ApiError`` from a write         mirrors 404, 409, 422 as the API server said; others 502
``httpx2.HTTPError`` from a write           503     the API server could not be reached
Starlette's ``HTTPException`` (``api.door``) its own  no such route (404), method (405), body too large (413)
=========================================  ======  ==================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from lightkube import ApiError as KubeApiError

from api.auth import AuthUnavailable, Refusal
from esi.wire.rest import ApiError, ErrorBody, FieldProblem, field_problems

__all__ = ["ErrorBody", "Problem", "install", "not_found", "problem_response", "refusal_responses", "refusals"]


class Problem(Exception):
    """A route's refusal: the status, a sentence, and the fields at fault."""

    def __init__(self, status: int, message: str, errors: Iterable[FieldProblem] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = list(errors)


def not_found(kind: str, name: str, namespace: str) -> Problem:
    return Problem(404, f"Not found: {kind} {name} in namespace {namespace}")


def refusals(*codes: int) -> dict[int | str, dict[str, Any]]:
    """A route's refusals for its OpenAPI description: those of every route (401, 403, 422, 503) and ``codes``."""
    meaning = {
        401: "No or an unknown bearer token",
        403: "The token's user may not do this in this namespace",
        404: "No such object in this namespace",
        409: "A conflicting change (e.g. the Scheduling is being deleted)",
        422: "The body or a parameter is invalid; `errors` names each field",
        503: "The Kubernetes API could not be asked",
    }
    return {code: {"model": ErrorBody, "description": meaning[code]} for code in (401, 403, 422, 503, *codes)}


def problem_response(
    status: int, message: str, errors: Sequence[FieldProblem] = (), headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = ApiError(message=message, errors=list(errors)).model_dump(mode="json")
    return JSONResponse({"detail": body}, status_code=status, headers=dict(headers or {}))


def _summary(problems: Sequence[FieldProblem], what: str) -> str:
    fields = ", ".join(dict.fromkeys(p.field for p in problems))
    return f"{what}: {fields}" if fields else what


async def _problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.message, exc.errors)


async def _invalid_request(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    body_errors = [e for e in exc.errors() if tuple(e.get("loc", ()))[:1] == ("body",)]
    other_errors = [e for e in exc.errors() if tuple(e.get("loc", ()))[:1] != ("body",)]
    problems = field_problems(body_errors, skip=1) + field_problems(other_errors)
    return problem_response(422, _summary(problems, "invalid request"), problems)


def refusal_responses(refusal: Refusal) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="esi"'} if refusal.status == 401 else {}
    return problem_response(refusal.status, refusal.reason, headers=headers)


async def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refusal)
    return refusal_responses(exc)


async def _auth_unavailable(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(503, f"cannot check the caller's token now: {exc}", headers={"Retry-After": "5"})


async def _kubernetes_refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KubeApiError)
    status = exc.status
    causes = (status.details.causes if status.details is not None else None) or []
    problems = [FieldProblem(field=c.field or "(body)", problem=c.message or c.reason or "invalid") for c in causes]
    code = status.code or 502
    if code in (404, 409, 422):
        return problem_response(code, status.message or f"the Kubernetes API answered {code}", problems)
    return problem_response(502, f"the Kubernetes API refused esi: {code} {status.message}", problems)


async def _kubernetes_unreachable(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(503, f"the Kubernetes API cannot be reached: {exc}", headers={"Retry-After": "5"})


def install(app: FastAPI) -> None:
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(Refusal, _refused)
    app.add_exception_handler(AuthUnavailable, _auth_unavailable)
    app.add_exception_handler(KubeApiError, _kubernetes_refused)
    app.add_exception_handler(httpx2.HTTPError, _kubernetes_unreachable)
