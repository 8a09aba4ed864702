"""The headless browser of the UI tests: Debian's Chromium, installed with apt-get when it is missing.

``python -m infra.browser ensure`` makes sure ``/usr/bin/chromium`` exists (``apt-get install chromium``,
non-interactively, with its progress on the terminal; ``apt-get update`` first only when the package lists
do not know Chromium yet) and prints its path; when Chromium is there it returns at once. ``path`` prints the
path, or fails if Chromium is not installed. Nothing is downloaded from a browser vendor: Playwright drives
this Chromium through ``executable_path`` and ``LAUNCH_ARGS`` (never ``playwright install``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CHROMIUM", "LAUNCH_ARGS", "PACKAGES", "BrowserError", "ensure", "main"]

CHROMIUM = Path("/usr/bin/chromium")
# A font with broad coverage keeps screenshots readable on a minimal image.
PACKAGES = ("chromium", "fonts-dejavu-core")
# Headless, and quiet on the network: no sync, updates or QUIC probes on a machine without internet.
LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class BrowserError(RuntimeError):
    """Chromium is not installed and could not be installed (the reason and the command in the message)."""


def _installed() -> bool:
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)


def _privileged(command: list[str]) -> list[str]:
    """``command`` as root: as it is when we are root, through ``sudo -n`` otherwise (never a password prompt)."""
    if os.geteuid() == 0:
        return command
    if shutil.which("sudo") is None:
        raise BrowserError(f"{CHROMIUM} is missing and installing it needs root: run as root `{' '.join(command)}`")
    return ["sudo", "-n", *command]


def _apt(args: Sequence[str]) -> None:
    command = _privileged(["apt-get", *args])
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"infra.browser: {' '.join(command)}", flush=True)
    status = subprocess.run(command, env=env, check=False).returncode
    if status != 0:
        raise BrowserError(f"`{' '.join(command)}` failed with exit status {status}")


def _known_to_apt(package: str) -> bool:
    """Whether the package lists have a candidate for ``package`` (they are empty on a fresh image)."""
    shown = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True, check=False).stdout
    return "Candidate:" in shown and "Candidate: (none)" not in shown


def ensure() -> Path:
    """The path of Chromium, installing Debian's package first if it is missing (idempotent)."""
    if _installed():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        raise BrowserError(f"{CHROMIUM} is missing and there is no apt-get to install it with")
    print(f"infra.browser: {CHROMIUM} is missing; installing Debian's {' and '.join(PACKAGES)}", flush=True)
    if not all(_known_to_apt(package) for package in PACKAGES):
        _apt(["update"])
    _apt(["install", "--yes", "--no-install-recommends", "-o", "Dpkg::Use-Pty=0", *PACKAGES])
    if not _installed():
        raise BrowserError(f"apt-get installed {', '.join(PACKAGES)} but {CHROMIUM} is still missing")
    return CHROMIUM


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m infra.browser", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", choices=["ensure", "path"])
    args = cli.parse_args(argv)
    try:
        if args.command == "ensure":
            print(ensure())
        elif _installed():
            print(CHROMIUM)
        else:
            print(f"{CHROMIUM} is not installed: python -m infra.browser ensure", file=sys.stderr)
            return 1
    except BrowserError as error:
        print(f"infra.browser: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
