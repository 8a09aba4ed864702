"""Root filesystems for esi's images, and the build-once cache steps the images share.

``debian_root`` fills a directory with Debian packages and their dependencies, downloaded by ``apt-get`` for an
empty system and unpacked with ``dpkg -x``: no maintainer script runs, so whatever a package's scripts would set
up (users, alternatives, certificates) is the caller's to write. Documentation and translations are trimmed.

A build goes into a cache directory keyed by a digest of what makes it (``digest``, ``recipe``); a directory
appears only once complete, and one builder at a time fills it (``building``: parallel test workers wait for
each other).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from infra.toolchain import commands

__all__ = ["PRUNED", "building", "debian_root", "digest", "link_tree", "recipe"]

# Trimmed from every root filesystem: documentation and translations no pod reads.
PRUNED: Final = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")


def digest(*parts: str) -> str:
    """A short digest of ``parts``: part of a cache entry's name."""
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(part.encode())
        hashed.update(b"\0")
    return hashed.hexdigest()[:10]


def recipe(*steps: Callable[..., object]) -> str:
    """What decides the files a build makes: the source of its steps (a changed step builds anew)."""
    return "".join(inspect.getsource(step) for step in steps)


@contextlib.contextmanager
def building(final: Path) -> Iterator[Path | None]:
    """Yield a scratch directory to fill, or None when ``final`` exists; the filled scratch becomes ``final``.

    One builder at a time per cache: the others wait, then find ``final`` there.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    with (final.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.is_dir():
            yield None
            return
        scratch = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}-"))
        scratch.chmod(0o755)  # it becomes a root directory or a distribution's home: every user reads it
        try:
            yield scratch
            scratch.rename(final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def link_tree(source: Path, target: Path) -> None:
    """Copy ``source`` into ``target`` as hard links (same file system: no data is copied)."""
    shutil.copytree(source, target, symlinks=True, copy_function=os.link, dirs_exist_ok=True)


def debian_root(rootfs: Path, packages: Sequence[str], *, error: type[Exception], what: str) -> list[str]:
    """Unpack ``packages`` and every package they depend on into ``rootfs`` (with a world-writable ``/tmp``);
    the names of the package files unpacked, sorted. ``what`` names the runtime in errors."""

    def run(cmd: Sequence[str | Path], step: str) -> str:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        return commands.run(cmd, error=error, what=step, timeout=900, env=env, last_lines=20)

    debs = rootfs.parent / f".debs-{rootfs.name}"
    (debs / "partial").mkdir(parents=True)
    empty_status = debs / "status"
    empty_status.touch()
    # An empty dpkg status: apt resolves every dependency as for a system that has nothing installed.
    apt = ["apt-get", "-q", "--yes", "--no-install-recommends", "-o", f"Dir::State::status={empty_status}"]
    apt += ["-o", f"Dir::Cache::archives={debs}", "-o", "Debug::NoLocking=1"]
    try:
        try:
            run([*apt, "install", "--download-only", *packages], f"download {what}")
        except error:
            run(["apt-get", "-q", "update"], "update Debian's package lists")
            run([*apt, "install", "--download-only", *packages], f"download {what}")
        files = sorted(debs.glob("*.deb"))
        for package in files:
            run(["dpkg-deb", "-x", package, rootfs], f"unpack {package.name}")
    finally:
        shutil.rmtree(debs, ignore_errors=True)
    for pruned in PRUNED:
        shutil.rmtree(rootfs / pruned, ignore_errors=True)
    (rootfs / "tmp").mkdir(mode=0o1777, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    return [package.name for package in files]
