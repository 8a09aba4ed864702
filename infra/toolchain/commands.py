"""Running the host's commands and holding machine-wide locks, for the infra modules.

``run`` runs a command and returns its standard output; a timeout, a missing program or a non-zero exit is
raised as the caller's error type, naming what was being done, the command and (the end of) what it said.
``exclusive`` holds an ``flock`` on a file: one holder per machine, released when the block ends or the
process dies. ``answers`` asks a local process's health endpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["exclusive", "run"]


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    error: type[Exception],
    what: str = "",
    timeout: float,
    check: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    last_lines: int | None = None,
    install_hint: str = "",
) -> str:
    """Standard output of ``cmd``; ``error(message)`` when it times out, is not installed or (with ``check``)
    fails. ``last_lines`` keeps only the end of a failure's output in the message; ``install_hint`` follows
    "is not installed" (e.g. which make target installs it)."""
    prefix = f"{what}: " if what else ""
    shown = " ".join(map(str, cmd))
    try:
        done = subprocess.run(
            [str(c) for c in cmd],
            env=env,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as err:
        raise error(f"{prefix}`{shown}` timed out after {timeout:.0f}s") from err
    except FileNotFoundError as err:
        raise error(f"{prefix}{cmd[0]} is not installed{install_hint}") from err
    if check and done.returncode != 0:
        output = done.stderr.strip() or done.stdout.strip()
        if last_lines is not None:
            output = "\n".join(output.splitlines()[-last_lines:])
        raise error(f"{prefix}`{shown}` failed (exit {done.returncode}):\n{output}")
    return done.stdout


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Held by one process of the machine at a time: an exclusive flock on ``lock_file`` (made if missing)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def answers(url: str) -> bool:
    """Whether a local process's health endpoint at ``url`` (http, loopback) answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own http:// URL)
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False
