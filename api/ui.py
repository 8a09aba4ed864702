"""The Manual Scheduler: a web UI for people, served by the API at ``/ui/`` (the files in ``api/ui/``).

Live views of the Testbeds (a column of slots per node), a Testbed's recent runs (a Gantt chart drawn by
Vega-Lite, vendored in ``api/ui/vendor/``), BatchJobs (with their run history) and Schedulings (with per-job
progress, and delete), a builder for queue and slot Schedulings, all over the public API: REST
under ``/external`` and STOMP at ``/scheduler``. The files themselves need no token, as they hold no data;
the page asks for the token once (kept in the tab's ``sessionStorage``) and sends it as
``Authorization: Bearer`` on REST and as ``?access_token=`` on the WebSocket, which browsers cannot give
headers. Plain ES modules with no build step, nothing loaded from elsewhere: the machines running esi may
have no internet. States are shown in esi's words, as kubectl shows them: objects' ``esiState``, and for slots
and a Scheduling's job entries, which have only the original's names on the wire, ``esi.wire.rest``'s
``ESI_STATE_NAMES`` (served as the module ``/ui/states.js``). ``install(app)`` is all an app needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from esi.wire.rest import ESI_STATE_NAMES

__all__ = ["PAGE", "STATIC", "install", "router"]

STATIC: Final = Path(__file__).with_name("ui")
PAGE: Final = "/ui/"

# Only this origin's scripts, styles and connections (REST and the WebSocket); the token lives in the page,
# so nothing else may run there. Chromium logs a violation to the console, which the UI test would catch.
_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated on each load (cheap: ETag), so a new esi's page is never mixed with an old one's modules.
    "Cache-Control": "no-cache",
}


class _UiFiles(StaticFiles):
    """The UI's files with the headers above; ``/ui/`` is ``index.html``."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(_HEADERS)
        return response


router = APIRouter(tags=["ui"])


def _to_page(request: Request) -> RedirectResponse:
    """To the page, keeping the query (``?namespace=``)."""
    query = request.url.query
    return RedirectResponse(f"{PAGE}?{query}" if query else PAGE)


@router.get("/", include_in_schema=False)
async def _root(request: Request) -> RedirectResponse:
    return _to_page(request)


@router.get("/ui", include_in_schema=False)
async def _ui(request: Request) -> RedirectResponse:
    return _to_page(request)


_STATE_NAMES_MODULE: Final = f"export const ESI_STATE_NAMES = {json.dumps(ESI_STATE_NAMES)};\n"


@router.get(f"{PAGE}states.js", include_in_schema=False)
async def _state_names() -> Response:
    """esi's names of the states that have only the original's names on the wire, for the page's scripts."""
    return Response(_STATE_NAMES_MODULE, media_type="text/javascript", headers=_HEADERS)


router.mount(PAGE.rstrip("/"), _UiFiles(directory=STATIC, html=True), name="ui")


def install(app: FastAPI) -> None:
    """Serve the Manual Scheduler at ``/ui/`` of ``app`` (``/`` and ``/ui`` redirect there); no token needed
    for the files. ``app`` is an API app (``api.app.create_api_app``): the page talks to its routes."""
    app.include_router(router)
