"""The host packages real nodes run on (``infra.local_cluster.real_node``), installed with apt-get when missing.

``python -m infra.toolchain.node_packages ensure`` makes sure Debian's container runtime and image tools are on this
machine: containerd (and its ``ctr``), runc, the CNI plugins, umoci and skopeo (a local root filesystem
becomes an image without a registry, ``infra.images``), a static busybox (the tools of test images), Java 17
and Maven (the Spark and Flink distributions, ``infra.images.spark``, ``infra.images.flink``). It
installs the missing ones non-interactively (``apt-get update`` first only when the package lists do not
know them yet) and returns at once when all are there. ``status`` lists what is missing and exits 1 if
anything is. Nothing starts the installed containerd: there is no systemd here, and each real node runs
a containerd of its own with a private configuration.

Runs with the bare system Python (stdlib only), like ``infra.toolchain``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from infra.toolchain import debian
from infra.toolchain.debian import DebianError

__all__ = ["CNI_BIN_DIR", "PACKAGES", "NodePackagesError", "ensure", "main", "missing"]

CNI_BIN_DIR = Path("/usr/lib/cni")
# Each package by the file that shows it is installed (and that infra.local_cluster.real_node or infra.images runs).
PACKAGES: Mapping[str, Path] = {
    "containerd": Path("/usr/bin/containerd"),
    "runc": Path("/usr/sbin/runc"),
    "containernetworking-plugins": CNI_BIN_DIR / "bridge",
    "umoci": Path("/usr/bin/umoci"),
    "skopeo": Path("/usr/bin/skopeo"),
    "busybox-static": Path("/bin/busybox"),
    "openjdk-17-jre-headless": Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java"),  # spark-submit (infra.images.spark)
    "maven": Path("/usr/bin/mvn"),  # Flink's examples jar from Maven Central (infra.images.flink)
}


class NodePackagesError(DebianError):
    """A package is missing and could not be installed (the reason and the command in the message)."""


def missing() -> list[str]:
    """The packages whose files are not on this machine, in ``PACKAGES`` order."""
    return debian.missing(PACKAGES)


def ensure() -> list[str]:
    """Install the missing packages (idempotent); returns the ones installed."""
    absent = missing()
    if not absent:
        return []
    debian.install(absent, caller="infra.toolchain.node_packages")
    still = missing()
    if still:
        raise NodePackagesError(
            f"apt-get installed {', '.join(absent)} but the files of {', '.join(still)} are missing"
        )
    return absent


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m infra.toolchain.node_packages", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", choices=["ensure", "status"])
    cli.add_argument(
        "--optional",
        action="store_true",
        help="when they cannot be installed (no root, no apt-get), say so and succeed: real nodes are then skipped",
    )
    args = cli.parse_args(argv)
    try:
        if args.command == "ensure":
            installed = ensure()
            print(f"installed {', '.join(installed)}" if installed else "every node package is installed")
        else:
            absent = missing()
            print(f"missing: {', '.join(absent)}" if absent else "every node package is installed")
            return 1 if absent else 0
    except DebianError as error:
        if args.optional:
            print(
                f"infra.toolchain.node_packages: {error}; real nodes cannot run here, their tests are skipped",
                file=sys.stderr,
            )
            return 0
        print(f"infra.toolchain.node_packages: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
