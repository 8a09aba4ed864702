"""Run the esi API against a cluster: ``python -m api --kubeconfig PATH --host 127.0.0.1 --port 8080``.

The extender's slot index follows the cluster's Testbeds and pods by watches (``api.index_feed``). Without
``--kubeconfig``, the configuration is found as kubectl would: in-cluster service account, ``$KUBECONFIG``
or ``~/.kube/config``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from lightkube import ConfigError, KubeConfig

from api.app import create_app

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m api",
        description="Serve esi's HTTP API: the kube-scheduler extender, its slot index following the cluster.",
    )
    cli.add_argument("--kubeconfig", type=Path, help="the cluster to follow (default: in-cluster, then kubectl's)")
    cli.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    cli.add_argument("--port", type=int, default=8080, help="port to listen on (default: %(default)s)")
    levels = ["debug", "info", "warning", "error"]
    cli.add_argument("--log-level", default="info", choices=levels, help="(default: %(default)s)")
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = KubeConfig.from_file(args.kubeconfig) if args.kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as err:
        print(f"python -m api: no usable Kubernetes configuration: {err}", file=sys.stderr)
        return 2
    uvicorn.run(create_app(kube_config=config), host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
