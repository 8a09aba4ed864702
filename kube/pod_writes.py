"""The two pod writes of an executor's bind — a ghost's deletion and a pod's binding — over a lean HTTP client.

The extender's bind verb sends both for every executor the second scheduler places, at the scheduler's pace.
Through lightkube and httpx each request costs the API process about 2 ms of CPU (httpx's request machinery,
on the same cores as the API server); through aiohttp about 0.9 ms (``bench.extender`` measures the bind).
Everything else keeps using lightkube.

The connection is lightkube's, read from the same ``KubeConfig``: its TLS context (the cluster's CA and the
user's client certificate) and its authentication (a bearer token, a token file re-read when the API server
answers 401 — a service account's rotating token —, an exec plugin, basic auth), whose flow is run for each
request to get its ``Authorization`` header. A refusal is raised as lightkube's ``ApiError``, so callers tell
refusals apart as everywhere else (``kube.errors.refusal``); a request that does not reach the API server
raises ``PodWriteFailed``.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Self

import aiohttp
import httpx2
from lightkube import ApiError, KubeConfig
from lightkube.config.client_adapter import user_auth, verify_cluster

from esi.resources.meta import is_namespace_name, is_object_name

__all__ = ["PodWriteFailed", "PodWrites"]

_TIMEOUT = aiohttp.ClientTimeout(total=10)  # as lightkube's
_JSON = "application/json"


class PodWriteFailed(Exception):
    """The request did not reach the API server, or its answer did not come back."""


class PodWrites:
    """Deletes and binds pods in the cluster of ``config``; ``close`` when done (or use it as an async context
    manager). Opens its connections on first use (inside the event loop that uses them)."""

    def __init__(self, config: KubeConfig) -> None:
        single = config.get()
        if single is None or single.user is None:
            raise ValueError("the kubeconfig names no current context with a user")
        self._server = single.cluster.server.rstrip("/")
        self._tls = verify_cluster(single.cluster, single.user, single.abs_file)
        self._auth = user_auth(single.user)
        self._proxy = _proxy_for(self._server)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def delete_exactly(self, namespace: str, name: str, *, uid: str | None) -> None:
        """Delete pod ``name`` at once (no grace period), only if it is still pod ``uid`` (when given): one made
        since under the same name is left alone (CONFLICT), one already gone is NOT_FOUND."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if uid:
            options["preconditions"] = {"uid": uid}
        await self._send("DELETE", _pod_path(namespace, name), options)

    async def bind(
        self, namespace: str, name: str, *, uid: str | None, node: str, annotations: Mapping[str, str]
    ) -> None:
        """Bind pod ``name`` (only if it is pod ``uid``, when given) to ``node``; the API server copies the
        Binding's ``annotations`` onto the pod in the same write."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = dict(annotations)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"kind": "Node", "name": node},
        }
        await self._send("POST", _pod_path(namespace, name) + "/binding", binding)

    async def _send(self, method: str, path: str, body: Mapping[str, Any]) -> None:
        url, content = self._server + path, json.dumps(body).encode()
        if self._auth is None:
            status, answer = await self._request(method, url, content, None)
        else:
            flow = self._auth.async_auth_flow(httpx2.Request(method, url))
            try:
                status, answer = await self._authorized(flow, method, url, content)
            finally:
                await flow.aclose()
        if status >= 300:
            raise ApiError(httpx2.Request(method, url), httpx2.Response(status, content=_status_of(status, answer)))

    async def _authorized(
        self, flow: AsyncGenerator[httpx2.Request, httpx2.Response], method: str, url: str, content: bytes
    ) -> tuple[int, bytes]:
        """Send with the credentials ``flow`` gives; a 401 goes back to it, which may renew them and ask again."""
        authorized = await anext(flow)
        while True:
            status, answer = await self._request(method, url, content, authorized.headers.get("Authorization"))
            if status != 401:
                return status, answer
            try:
                authorized = await flow.asend(httpx2.Response(status, content=answer))
            except StopAsyncIteration:
                return status, answer

    async def _request(self, method: str, url: str, content: bytes, authorization: str | None) -> tuple[int, bytes]:
        headers = {"Content-Type": _JSON, "Accept": _JSON}
        if authorization is not None:
            headers["Authorization"] = authorization
        if self._session is None:
            # Not trust_env: aiohttp would then read the proxy variables and ~/.netrc again for every request.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._tls), timeout=_TIMEOUT)
        try:
            async with self._session.request(method, url, data=content, headers=headers, proxy=self._proxy) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as err:
            raise PodWriteFailed(f"{method} {url}: {err or type(err).__name__}") from err


def _pod_path(namespace: str, name: str) -> str:
    """The pod's path on the API server; a name that is no object name would make it another path."""
    if not is_namespace_name(namespace):
        raise PodWriteFailed(f"not a namespace name: {namespace!r}")
    if not is_object_name(name):
        raise PodWriteFailed(f"not a pod name: {name!r}")
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def _proxy_for(server: str) -> str | None:
    """The proxy the environment names for ``server`` (``HTTPS_PROXY``, ``NO_PROXY``, …), as httpx under lightkube
    finds it; read once."""
    parts = urllib.parse.urlsplit(server)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _status_of(code: int, answer: bytes) -> bytes:
    """The API server's Status for a refusal; one made up from the code if the answer is not one (a proxy's)."""
    try:
        read = json.loads(answer)
    except ValueError:
        read = None
    if isinstance(read, dict) and read.get("kind") == "Status":
        return answer
    message = answer.decode(errors="replace")[:300] or f"HTTP {code}"
    made_up = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "message": message}
    return json.dumps(made_up).encode()
