"""What a REST route is given: the caller, the namespace it works in, the cache and the run table it reads, the
client it writes with — each an ``Annotated`` alias for a route's parameters, read from the app that serves the
request.

``create_api_app`` puts what these read on ``app.state``; a test swaps any of them with
``app.dependency_overrides``. ``AskedView`` is the ``view`` query parameter: the original's shape unless a
client asks for esi's. ``may(verb, *resources)`` is the route-level permission check: the caller's
token must allow ``verb`` on each resource in the namespace (``api.auth``); ``may_cluster_wide`` the same for a
cluster-scoped resource of any API group. ``CheckedFirst`` is the class of every ``/external`` route: a caller who
may not call it hears so before anything about their body.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import solve_dependencies
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from lightkube import AsyncClient
from starlette.exceptions import HTTPException

from api.auth import Authenticator, Principal, bearer_token
from api.cache import ResourceCache
from api.runs import RunStore
from esi.resources.meta import NAMESPACE_PATTERN
from esi.wire.rest import View

__all__ = [
    "AskedView",
    "Auth",
    "Cache",
    "Caller",
    "CheckedFirst",
    "Kube",
    "Namespace",
    "Runs",
    "bearer",
    "may",
    "may_cluster_wide",
]

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
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],  # the scheme, in the OpenAPI description
) -> Principal:
    principal = await authenticator.authenticate(bearer_token(request.headers.get("authorization")))
    request.state.principal = principal  # for the access log
    return principal


Caller = Annotated[Principal, Depends(_caller)]


def may(verb: str, *resources: str) -> Any:
    """A route dependency: the caller may ``verb`` each of esi's ``resources`` in the namespace, or is refused."""

    async def check(authenticator: Auth, caller: Caller, namespace: Namespace) -> None:
        for resource in resources:
            await authenticator.authorize(caller, verb, resource, namespace)

    return Depends(check)


def may_cluster_wide(verb: str, resource: str, *, group: str) -> Any:
    """A route dependency: the caller may ``verb`` the cluster-scoped ``resource`` of API ``group`` (``""``: the
    core group, as for nodes), or is refused."""

    async def check(authenticator: Auth, caller: Caller) -> None:
        await authenticator.authorize(caller, verb, resource, "", group=group)

    return Depends(check)


class CheckedFirst(APIRoute):
    """A route that refuses a caller who may not call it (401, 403) before it says anything about their body.

    FastAPI decodes a JSON body before it resolves a route's dependencies, so a body that is no JSON (or no
    UTF-8) was a 422 or 400 to anyone, the token unchecked. When decoding fails, the route's dependencies
    (``may`` among them) are resolved first, and a refusal among them is the answer; a body that decodes but
    does not fit is refused after them already, as FastAPI resolves dependencies before it validates the body.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        checks = Dependant(dependencies=list(self.dependant.dependencies), path=self.path_format)

        async def checked_first(request: Request) -> Response:
            try:
                return await handler(request)
            except (RequestValidationError, HTTPException) as err:
                if _undecodable(err):
                    await solve_dependencies(
                        request=request,
                        dependant=checks,
                        body=None,
                        dependency_overrides_provider=self.dependency_overrides_provider,
                        async_exit_stack=request.scope["fastapi_inner_astack"],
                        embed_body_fields=False,
                    )
                raise

        return checked_first


def _undecodable(err: RequestValidationError | HTTPException) -> bool:
    """Whether FastAPI refused a body it could not decode (as it does before resolving any dependency)."""
    if isinstance(err, HTTPException):
        return err.status_code == 400
    return any(e.get("type") == "json_invalid" for e in err.errors())
