"""Run the esi API against a cluster: ``python -m api --kubeconfig PATH [--token-file PATH]``.

Two listeners in one process: the external scheduler API (REST, STOMP, docs, health, metrics) on
``--host``/``--port``, and the scheduler extender on ``--extender-host``/``--extender-port`` (no bearer token
is possible there: keep it where only the second kube-scheduler reaches it). Both follow the cluster by
watches; Testbeds, which both read, by one stream the process runs for the two. Without ``--kubeconfig``
the configuration is found as kubectl would: in-cluster service account, ``$KUBECONFIG`` or
``~/.kube/config``.

Tokens: with ``--token-file``, one static token (created there, mode 0600, if missing) — the local stack;
without, Kubernetes decides (TokenReview + SubjectAccessReview against RBAC on the esi resources). A caller
without a token is ``system:anonymous``: RBAC decides for it in a cluster; with ``--token-file`` it is turned
away unless ``--allow-anonymous`` lets it do anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import uvicorn
from lightkube import AsyncClient, ConfigError, KubeConfig

from api.app import create_api_app
from api.auth import Authenticator, KubernetesAuth, StaticToken
from api.extender.app import create_extender_app
from api.logs import configure
from kube.resources import TestbedResource
from kube.watch import Stream, streaming

__all__ = ["main", "parser"]

log = logging.getLogger("esi.api")


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m api",
        description="Serve esi's external scheduler API and, on a listener of its own, the scheduler extender.",
    )
    cli.add_argument("--kubeconfig", type=Path, help="the cluster to follow (default: in-cluster, then kubectl's)")
    cli.add_argument("--host", default="127.0.0.1", help="address of the API (default: %(default)s)")
    cli.add_argument("--port", type=int, default=8082, help="port of the API (default: %(default)s)")
    cli.add_argument("--extender-host", default="127.0.0.1", help="address of the extender (default: %(default)s)")
    cli.add_argument("--extender-port", type=int, default=8080, help="port of the extender (default: %(default)s)")
    cli.add_argument(
        "--namespace", default="default", help="namespace when a request names none (default: %(default)s)"
    )
    cli.add_argument(
        "--token-file",
        type=Path,
        help="accept exactly the token in this file, creating it if missing (the local stack); "
        "default: Kubernetes TokenReview + SubjectAccessReview",
    )
    cli.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="with --token-file: let callers without a token read and submit, as system:anonymous, like the "
        "original ESI (anyone who can reach the port may then use the API: only where nobody else can)",
    )
    cli.add_argument(
        "--stomp-buffer", type=int, default=1000, help="messages a STOMP client may fall behind (default: %(default)s)"
    )
    levels = ["debug", "info", "warning", "error"]
    cli.add_argument("--log-level", default="info", choices=levels, help="(default: %(default)s)")
    cli.add_argument("--log-format", default="json", choices=["json", "text"], help="(default: %(default)s)")
    return cli


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to ``main`` (two servers share one process)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(args: argparse.Namespace, config: KubeConfig) -> None:
    authenticator: Authenticator
    closing = []
    if args.token_file is not None:
        authenticator = StaticToken.from_file(args.token_file, create=True, anonymous=args.allow_anonymous)
    else:
        client = AsyncClient(config=config)
        authenticator = KubernetesAuth(client)
        closing.append(client.close)
    testbeds = Stream("testbeds", TestbedResource, joinable=True)  # the extender joins as its app starts
    api = create_api_app(
        authenticator,
        namespace=args.namespace,
        kube_config=config,
        stomp_buffer=args.stomp_buffer,
        closing=closing,
        testbed_stream=testbeds,
    )
    extender = create_extender_app(kube_config=config, testbed_stream=testbeds)
    servers = [
        _Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, log_level=args.log_level))
        for app, host, port in ((api, args.host, args.port), (extender, args.extender_host, args.extender_port))
    ]

    def stop() -> None:
        for server in servers:
            server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    log.info(
        "serving the API on http://%s:%s (docs at /docs) and the extender on http://%s:%s/extender",
        args.host,
        args.port,
        args.extender_host,
        args.extender_port,
    )
    client = AsyncClient(config=config)
    try:
        async with streaming([testbeds], client):
            await asyncio.gather(*(server.serve() for server in servers))
    finally:
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.allow_anonymous and args.token_file is None:
        cli.error("--allow-anonymous needs --token-file: in a cluster, RBAC decides what system:anonymous may do")
    configure(args.log_level, args.log_format)
    try:
        config = KubeConfig.from_file(args.kubeconfig) if args.kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as err:
        print(f"python -m api: no usable Kubernetes configuration: {err}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(args, config))
    except (OSError, ValueError) as err:  # a port in use, an unreadable token file
        print(f"python -m api: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
