"""Debian's Java runtime as an image's root filesystem, and the JVM images made on it (``jvm_image``).

``java_runtime`` is ``openjdk-17-jre-headless`` with its dependencies and the tools the Spark and Flink images'
scripts call (``bash``, ``coreutils``, ``findutils``, ``grep``, ``sed``, ``util-linux``, ``tini``), unpacked from
Debian's packages (``infra.images.root_filesystems.debian_root``: no maintainer script runs, so ``/etc/passwd`` —
root and the users Spark's and Flink's own images run as — is written here, and Java's ``cacerts`` stays absent: the
Kubernetes client trusts the cluster's CA from the service account). The same runtime runs
``spark-submit`` and ``flink`` on this machine (``host_java_home``). It is built once into a cache directory, as
every image step is (``infra.images.root_filesystems``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from infra import images, toolchain
from infra.images.root_filesystems import PRUNED, building, debian_root, digest, link_tree, recipe

__all__ = [
    "DEBIAN_PACKAGES",
    "FLINK_UID",
    "JAVA_HOME",
    "SPARK_UID",
    "JavaRuntimeError",
    "host_java_home",
    "host_java_missing",
    "java_runtime",
    "jvm_image",
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


def host_java_home() -> Path:
    """The Java runtime on this machine that spark-submit, flink and the Scala compiler run on."""
    java_home = Path(JAVA_HOME)
    if not os.access(java_home / "bin" / "java", os.X_OK):
        raise JavaRuntimeError(
            f"no Java runtime in {java_home}: install Debian's openjdk-17-jre-headless "
            "(python -m infra.toolchain.node_packages ensure)"
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
    made_by = recipe(_unpack_debian, debian_root)
    final = cache_dir() / f"jre-{digest(*DEBIAN_PACKAGES, *PRUNED, _PASSWD, _GROUP, made_by)}"
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
    user: str | None = None,
) -> images.BuiltImage:
    """The image ``esi.local/<name>:<version>-<digest>``: the Java runtime, ``distribution`` at ``home``, the
    script ``entrypoint`` (path, text) as its entry point; ``finish`` adds to the root filesystem; ``user``
    (``uid:gid``) runs it, root when None. Built once."""
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
        name, tag, populate, entrypoint=[path], env=_image_env(home_variable, home), workdir=workdir, user=user
    )


def _unpack_debian(rootfs: Path) -> None:
    packages = debian_root(rootfs, DEBIAN_PACKAGES, error=JavaRuntimeError, what="Debian's Java runtime")
    (rootfs / "debian-packages.txt").write_text("".join(f"{p}\n" for p in packages))
    (rootfs / "etc" / "passwd").write_text(_PASSWD)
    (rootfs / "etc" / "group").write_text(_GROUP)
    if not os.access(rootfs / JAVA_HOME.lstrip("/") / "bin" / "java", os.X_OK):
        raise JavaRuntimeError(f"Debian's packages unpacked, but {JAVA_HOME}/bin/java is not in {rootfs}")
