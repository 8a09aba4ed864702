"""Run esi's local stand-in for the Flink Kubernetes operator: ``python -m flink_standin --help``.

Submits each FlinkDeployment of the given namespaces with the real Flink client (native Kubernetes,
application mode) and reports its status as the operator would (see ``flink_standin``). Meant for a local
cluster with real nodes; ``infra.stacks.flink_standin_process.start_standin`` starts it with the right arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from lightkube import ApiError, Client, ConfigError, KubeConfig
from lightkube.resources.discovery_v1 import EndpointSlice

from flink_standin.controller import Settings, run
from flink_standin.health import HealthEndpoint
from flink_standin.submission import LocalCluster
from kube.resources import API_SERVER_SLICE, api_server_for_pods


def _directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return path


def _api(text: str) -> tuple[str, int]:
    url = urlsplit(text)
    if url.scheme != "https" or not url.hostname:
        raise argparse.ArgumentTypeError(f"expected https://HOST:PORT, not {text!r}")
    return url.hostname, url.port or 443


def _api_server_for_pods(kubeconfig: Path) -> tuple[str, int]:
    """Where pods reach the API server, read from the cluster (``kube.resources.api_server_for_pods``)."""
    namespace, name = API_SERVER_SLICE
    client = Client(config=KubeConfig.from_file(kubeconfig))
    try:
        endpoint_slice = client.get(EndpointSlice, name, namespace=namespace).to_dict()
    finally:
        client.close()
    return _api(api_server_for_pods(endpoint_slice))


def _health(text: str) -> HealthEndpoint:
    try:
        return HealthEndpoint.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse(argv: Sequence[str]) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m flink_standin",
        description="Run FlinkDeployments with the real Flink client, as the Flink Kubernetes operator would, "
        "on a local cluster with real nodes.",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True, help="the cluster's kubeconfig (admin)")
    parser.add_argument(
        "--namespace", dest="namespaces", action="append", required=True, help="a namespace to handle (repeat)"
    )
    parser.add_argument("--flink-home", type=_directory, required=True, help="the Flink distribution (bin/flink)")
    parser.add_argument("--java-home", type=_directory, required=True, help="the Java runtime for Flink's client")
    parser.add_argument("--workdir", type=Path, required=True, help="where submissions keep templates and logs")
    parser.add_argument(
        "--pod-api-server",
        type=_api,
        help="the API server as pods on the real nodes reach it (https://HOST:PORT; default: the address and "
        "port of the kubernetes Service's EndpointSlice, read from the cluster)",
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between rounds (default 2)")
    parser.add_argument(
        "--health",
        type=_health,
        metavar="http://HOST:PORT/PATH",
        help="serve a health endpoint there: 200 once the namespaces were read, 503 before",
    )
    args = parser.parse_args(argv)
    if not (args.flink_home / "bin" / "flink").is_file():
        parser.error(f"--flink-home {args.flink_home} has no bin/flink")
    if not args.interval > 0:
        parser.error("--interval must be positive")
    try:
        host, port = args.pod_api_server or _api_server_for_pods(args.kubeconfig)
    except (OSError, ConfigError, ApiError, httpx2.HTTPError, ValueError) as err:
        parser.error(f"cannot read where pods reach the API server (give --pod-api-server): {err}")
    return Settings(
        kubeconfig=args.kubeconfig,
        namespaces=tuple(args.namespaces),
        flink_home=args.flink_home,
        java_home=args.java_home,
        workdir=args.workdir,
        local=LocalCluster(kubeconfig=str(args.kubeconfig), api_host=host, api_port=port),
        interval=args.interval,
        health=args.health,
    )


def main(argv: Sequence[str] | None = None) -> None:
    settings = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("httpx", "httpx2"):  # a line per request
        logging.getLogger(chatty).setLevel(logging.WARNING)
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
