"""Run esi's local stand-in for the Flink Kubernetes operator: ``python -m flink_standin --help``.

Submits each FlinkDeployment of the given namespaces with the real Flink client (native Kubernetes,
application mode) and reports its status as the operator would (see ``flink_standin``). Meant for a local
cluster with real nodes; ``infra.flink_standin.start_standin`` starts it with the right arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from flink_standin.controller import Settings, run
from flink_standin.submission import LocalCluster


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
        required=True,
        help="the API server as pods on the real nodes reach it (https://HOST:PORT)",
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between rounds (default 2)")
    args = parser.parse_args(argv)
    if not (args.flink_home / "bin" / "flink").is_file():
        parser.error(f"--flink-home {args.flink_home} has no bin/flink")
    if not args.interval > 0:
        parser.error("--interval must be positive")
    host, port = args.pod_api_server
    return Settings(
        kubeconfig=args.kubeconfig,
        namespaces=tuple(args.namespaces),
        flink_home=args.flink_home,
        java_home=args.java_home,
        workdir=args.workdir,
        local=LocalCluster(kubeconfig=str(args.kubeconfig), api_host=host, api_port=port),
        interval=args.interval,
    )


def main(argv: Sequence[str] | None = None) -> None:
    settings = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
