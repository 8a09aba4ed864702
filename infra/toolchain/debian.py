"""Debian packages the project needs on the host, installed with apt-get when missing.

``install`` runs ``apt-get install`` non-interactively (``apt-get update`` first only when the package lists
do not know a package yet, as on a fresh image), as root or through ``sudo -n`` (never a password prompt).
``missing`` says which of a set of packages are absent, each judged by a file it installs. Used by
``infra.toolchain.browser`` and ``infra.toolchain.node_packages``; runs with the bare system Python (stdlib only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DebianError", "install", "missing"]


class DebianError(RuntimeError):
    """A package could not be installed (the reason and the command in the message)."""


def missing(packages: Mapping[str, Path]) -> list[str]:
    """The packages (name → an executable file it installs) whose file is not on this machine, in order."""
    return [name for name, path in packages.items() if not (path.is_file() and os.access(path, os.X_OK))]


def install(packages: Sequence[str], *, caller: str) -> None:
    """``apt-get install`` ``packages``; ``caller`` prefixes what is printed (e.g. ``infra.toolchain.browser``)."""
    if shutil.which("apt-get") is None:
        raise DebianError(f"{', '.join(packages)} missing and there is no apt-get to install them with")
    print(f"{caller}: installing Debian's {', '.join(packages)}", flush=True)
    if not all(_known_to_apt(package) for package in packages):
        _apt(["update"], caller)
    _apt(["install", "--yes", "--no-install-recommends", "-o", "Dpkg::Use-Pty=0", *packages], caller)


def _privileged(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return command
    if shutil.which("sudo") is None:
        raise DebianError(f"installing packages needs root: run as root `{' '.join(command)}`")
    return ["sudo", "-n", *command]


def _apt(args: Sequence[str], caller: str) -> None:
    command = _privileged(["apt-get", *args])
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"{caller}: {' '.join(command)}", flush=True)
    status = subprocess.run(command, env=env, check=False).returncode
    if status != 0:
        raise DebianError(f"`{' '.join(command)}` failed with exit status {status}")


def _known_to_apt(package: str) -> bool:
    """Whether the package lists have a candidate for ``package`` (they are empty on a fresh image)."""
    shown = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True, check=False).stdout
    return "Candidate:" in shown and "Candidate: (none)" not in shown
