"""What a REST route is given: the caller, the namespace it works in, the cache and the run table it reads, the
client it writes with — each an ``Annotated`` alias for a route's parameters, read from the app that serves the
request.

``create_api_app`` puts what these read on ``app.state``; a test swaps any of them with
``app.dependency_overrides``. ``AskedView`` is the ``view`` query parameter: the original's shape unless a
client asks for esi's. ``may(verb, *resources)`` is the route-level permission check: the caller's
token must allow ``verb`` on each resource in the namespace (``api.auth``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from lightkube import AsyncClient

from api.auth import Authenticator, Principal
from api.cache import ResourceCache
from api.runs import RunStore
from esi.resources.meta import NAMESPACE_PATTERN
from esi.wire.rest import View

__all__ = ["AskedView", "Auth", "Cache", "Caller", "Kube", "Namespace", "Runs", "bearer", "may"]

bearer = HTTPBearer(auto_error=False, description="A Kubernetes token (in a cluster) or the local stack's token.")


async def _cache(request: Request) -> ResourceCache:
    cache: ResourceCache = request.app.state.cache
    return cache


async def _runs(request: Request) -> RunStore:
    runs: RunStore = request.app.state.runs
    return runs


async def _kube(request: Request) -> AsyncClient:
    kube: AsyncClient = request.app.state.kube
    return kube


async def _authenticator(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


async def _namespace(
    request: Request,
    namespace: Annotated[
        str | None,
        Query(
            max_length=63,
            pattern=NAMESPACE_PATTERN,
            description="The namespace to work in; the server's default namespace when left out.",
        ),
    ] = None,
) -> str:
    return namespace or str(request.app.state.namespace)


async def _view(
    view: Annotated[
        View,
        Query(
            description="original (the default): exactly the original ESI's fields, as its clients expect; "
            "esi: those and esi's own (namespace, esiState, waitingFor, message, conditions, …)."
        ),
    ] = View.ORIGINAL,
) -> View:
    return view


Cache = Annotated[ResourceCache, Depends(_cache)]
Runs = Annotated[RunStore, Depends(_runs)]
Kube = Annotated[AsyncClient, Depends(_kube)]
Auth = Annotated[Authenticator, Depends(_authenticator)]
Namespace = Annotated[str, Depends(_namespace)]
AskedView = Annotated[View, Depends(_view)]


async def _caller(
    request: Request,
    authenticator: Auth,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    principal = await authenticator.authenticate(credentials.credentials if credentials is not None else None)
    request.state.principal = principal  # for the access log
    return principal


Caller = Annotated[Principal, Depends(_caller)]


def may(verb: str, *resources: str) -> Any:
    """A route dependency: the caller may ``verb`` each of ``resources`` in the namespace, or is refused."""

    async def check(authenticator: Auth, caller: Caller, namespace: Namespace) -> None:
        for resource in resources:
            await authenticator.authorize(caller, verb, resource, namespace)

    return Depends(check)
