"""esi's clients of the API server, whose idle connections are kept as long as the API server keeps them.

httpx closes a connection after 5 s without a request, aiohttp after 15 s; then a write after a quiet spell — a
Scheduling's first status write, the first bind of a burst — would begin with a new TCP connection and TLS
handshake: CPU for the API server and the writer, and 12 to 35 ms for the write on a busy two-core machine.
kube-apiserver closes idle connections after 90 s (client-go keeps them as long); esi closes its own after
``IDLE_SECONDS``, before the server does, so that it never sends on a connection the server is closing.
"""

from __future__ import annotations

from typing import Final

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User

__all__ = ["IDLE_SECONDS", "api_client", "current"]

IDLE_SECONDS: Final = 60.0


def current(config: KubeConfig | None) -> tuple[SingleConfig, User]:
    """The current context of ``config`` — of the environment's kubeconfig, or the pod's service account, when
    None — and its user."""
    single = (config if config is not None else KubeConfig.from_env()).get()
    if single is None or single.user is None:
        raise ValueError("the kubeconfig names no current context with a user")
    return single, single.user


def api_client(config: KubeConfig | None = None, *, field_manager: str | None = None) -> AsyncClient:
    """A lightkube client of ``config`` (see ``current``) keeping idle connections ``IDLE_SECONDS``; the pool's
    other limits are httpx's."""
    single, user = current(config)
    limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=IDLE_SECONDS)
    tls = verify_cluster(single.cluster, user, single.abs_file)
    return AsyncClient(
        config=single, field_manager=field_manager, transport=httpx2.AsyncHTTPTransport(verify=tls, limits=limits)
    )
