"""Debian's Java runtime as an image's root filesystem, and the build-once cache steps esi's JVM images share.

``java_runtime`` is ``openjdk-17-jre-headless`` with its dependencies and the tools the Spark and Flink images'
scripts call (``bash``, ``coreutils``, ``findutils``, ``grep``, ``sed``, ``util-linux``, ``tini``), unpacked with
``dpkg -x`` from packages ``apt-get`` downloads for an empty system — no maintainer script runs, so
``/etc/passwd`` (root and the users Spark's and Flink's own images run as) is written here and Java's ``cacerts``
stays absent (the Kubernetes client trusts the cluster's CA from the service account). The same runtime runs
``spark-submit`` and ``flink`` on this machine (``host_java_home``).

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

from infra import commands, images, toolchain

__all__ = [
    "DEBIAN_PACKAGES",
    "FLINK_UID",
    "JAVA_HOME",
    "SPARK_UID",
    "JavaRuntimeError",
    "building",
    "digest",
    "host_java_home",
    "host_java_missing",
    "java_runtime",
    "jvm_image",
    "link_tree",
    "recipe",
]

JAVA_HOME: Final = "/usr/lib/jvm/java-17-openjdk-amd64"  # where Debian's openjdk-17 lives, here and in the images
# What the root filesystem is made of; apt-get adds their dependencies. findutils, grep, sed and util-linux
# (rev, flock) are what Flink's scripts call; Essential packages, so an empty system's resolve needs them named.
DEBIAN_PACKAGES: Final = (
    "openjdk-17-jre-headless",
    "bash",
    "coreutils",
    "findutils",
    "grep",
    "sed",
    "util-linux",
    "tini",
)
SPARK_UID: Final = 185  # the user Spark's own images run as; listed in /etc/passwd so a pod may choose it
FLINK_UID: Final = 9999  # the user Flink's own images run as
# Trimmed from the runtime: documentation and translations no pod reads.
_PRUNED: Final = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")
_PASSWD: Final = (
    "root:x:0:0:root:/root:/bin/bash\n"
    f"spark:x:{SPARK_UID}:{SPARK_UID}:spark:/opt/spark:/bin/false\n"
    f"flink:x:{FLINK_UID}:{FLINK_UID}:flink:/opt/flink:/bin/false\n"
)
_GROUP: Final = f"root:x:0:\nspark:x:{SPARK_UID}:\nflink:x:{FLINK_UID}:\n"


class JavaRuntimeError(RuntimeError):
    """Building the Java runtime (or a step of a JVM image) failed; the message says which step."""


def cache_dir() -> Path:
    return toolchain.cache_root() / "java-runtime"


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


def host_java_home() -> Path:
    """The Java runtime on this machine that spark-submit, flink and the Scala compiler run on."""
    java_home = Path(JAVA_HOME)
    if not os.access(java_home / "bin" / "java", os.X_OK):
        raise JavaRuntimeError(
            f"no Java runtime in {java_home}: install Debian's openjdk-17-jre-headless "
            "(python -m infra.node_packages ensure)"
        )
    return java_home


def host_java_missing() -> str | None:
    """Why this machine has no Java runtime for the local operators' clients (and what to run), or None."""
    try:
        host_java_home()
    except JavaRuntimeError as err:
        return str(err)
    return None


def java_runtime() -> Path:
    """A root filesystem with Debian's Java runtime and the tools the images' scripts call; built once."""
    final = cache_dir() / f"jre-{digest(*DEBIAN_PACKAGES, *_PRUNED, _PASSWD, _GROUP, recipe(_unpack_debian))}"
    with building(final) as scratch:
        if scratch is not None:
            _unpack_debian(scratch)
    return final


def _image_env(home_variable: str, home: str) -> dict[str, str]:
    """A JVM image's environment: Java, the distribution's home (``home_variable``) and its ``bin/`` first on PATH."""
    return {
        "JAVA_HOME": JAVA_HOME,
        home_variable: home,
        "PATH": f"{home}/bin:{JAVA_HOME}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
    }


def jvm_image(
    name: str,
    version: str,
    distribution: Path,
    *,
    home: str,
    home_variable: str,
    entrypoint: tuple[str, str],
    workdir: str,
    finish: Callable[[Path], None] = lambda _: None,
) -> images.BuiltImage:
    """The image ``esi.local/<name>:<version>-<digest>``: the Java runtime, ``distribution`` at ``home``, the
    script ``entrypoint`` (path, text) as its entry point; ``finish`` adds to the root filesystem. Built once."""
    runtime = java_runtime()
    contents = (runtime / "debian-packages.txt").read_text()
    tag = f"{version}-{digest(distribution.name, contents, *entrypoint)}"
    path, script = entrypoint

    def populate(rootfs: Path) -> None:
        link_tree(runtime, rootfs)
        (rootfs / "debian-packages.txt").unlink()
        link_tree(distribution, rootfs / home.lstrip("/"))
        written = rootfs / path.lstrip("/")
        written.write_text(script)
        written.chmod(0o755)
        finish(rootfs)

    return images.build_image(
        name, tag, populate, entrypoint=[path], env=_image_env(home_variable, home), workdir=workdir
    )


def _run(cmd: Sequence[str | Path], what: str) -> str:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return commands.run(cmd, error=JavaRuntimeError, what=what, timeout=900, env=env, last_lines=20)


def _unpack_debian(rootfs: Path) -> None:
    debs = rootfs.parent / f".debs-{rootfs.name}"
    (debs / "partial").mkdir(parents=True)
    empty_status = debs / "status"
    empty_status.touch()
    # An empty dpkg status: apt resolves every dependency as for a system that has nothing installed.
    apt = ["apt-get", "-q", "--yes", "--no-install-recommends", "-o", f"Dir::State::status={empty_status}"]
    apt += ["-o", f"Dir::Cache::archives={debs}", "-o", "Debug::NoLocking=1"]
    try:
        try:
            _run([*apt, "install", "--download-only", *DEBIAN_PACKAGES], "download Debian's Java runtime")
        except JavaRuntimeError:
            _run(["apt-get", "-q", "update"], "update Debian's package lists")
            _run([*apt, "install", "--download-only", *DEBIAN_PACKAGES], "download Debian's Java runtime")
        packages = sorted(debs.glob("*.deb"))
        for package in packages:
            _run(["dpkg-deb", "-x", package, rootfs], f"unpack {package.name}")
        (rootfs / "debian-packages.txt").write_text("".join(f"{p.name}\n" for p in packages))
    finally:
        shutil.rmtree(debs, ignore_errors=True)
    for pruned in _PRUNED:
        shutil.rmtree(rootfs / pruned, ignore_errors=True)
    (rootfs / "etc" / "passwd").write_text(_PASSWD)
    (rootfs / "etc" / "group").write_text(_GROUP)
    (rootfs / "tmp").mkdir(mode=0o1777, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    if not os.access(rootfs / JAVA_HOME.lstrip("/") / "bin" / "java", os.X_OK):
        raise JavaRuntimeError(f"Debian's packages unpacked, but {JAVA_HOME}/bin/java is not in {rootfs}")
