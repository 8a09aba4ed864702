"""The headless browser of the UI tests: Debian's Chromium, installed with apt-get when it is missing.

``python -m infra.toolchain.browser ensure`` makes sure ``/usr/bin/chromium`` exists (``apt-get install chromium``,
non-interactively, with its progress on the terminal; ``apt-get update`` first only when the package lists
do not know Chromium yet) and prints its path; when Chromium is there it returns at once. ``path`` prints the
path, or fails if Chromium is not installed. Nothing is downloaded from a browser vendor: Playwright drives
this Chromium through ``executable_path`` and ``LAUNCH_ARGS`` (never ``playwright install``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from infra.toolchain import debian
from infra.toolchain.debian import DebianError

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


class BrowserError(DebianError):
    """Chromium is not installed and could not be installed (the reason and the command in the message)."""


def _installed() -> bool:
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)


def ensure() -> Path:
    """The path of Chromium, installing Debian's package first if it is missing (idempotent)."""
    if _installed():
        return CHROMIUM
    print(f"infra.toolchain.browser: {CHROMIUM} is missing", flush=True)
    debian.install(PACKAGES, caller="infra.toolchain.browser")
    if not _installed():
        raise BrowserError(f"apt-get installed {', '.join(PACKAGES)} but {CHROMIUM} is still missing")
    return CHROMIUM


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m infra.toolchain.browser", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", choices=["ensure", "path"])
    args = cli.parse_args(argv)
    try:
        if args.command == "ensure":
            print(ensure())
        elif _installed():
            print(CHROMIUM)
        else:
            print(f"{CHROMIUM} is not installed: python -m infra.toolchain.browser ensure", file=sys.stderr)
            return 1
    except DebianError as error:
        print(f"infra.toolchain.browser: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
