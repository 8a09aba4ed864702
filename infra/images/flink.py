"""The Flink distribution and the Flink image, made on this machine from package registries only.

**The distribution** (``flink_home``) is what PyPI ships as ``apache-flink-libraries`` (``lib/`` with
``flink-dist``, which holds Flink's native Kubernetes integration, ``opt/``, ``plugins/``) and ``apache-flink``
(``bin/``, ``conf/``) of the ``flink`` pin of ``[tool.esi.toolchain]``: both unpack into one ``pyflink/``
directory that is a complete ``FLINK_HOME``. Neither ships Java examples, so
``examples/streaming/`` holds Flink's own ``flink-examples-streaming`` jar from Maven Central (WordCount and the
other streaming examples; the jar names no main class, so a run names ``WORD_COUNT_CLASS``).

**The image** (``flink_image``, ``esi.local/flink:<flink version>-<digest>``) is Debian's Java runtime
(``infra.images.java_runtime``) plus the distribution in ``/opt/flink`` and ``/docker-entrypoint.sh``, the entry point
Flink's Kubernetes integration names by default (``kubernetes.entry.path``). Flink starts its JobManager and
TaskManager pods with ``bash -c "kubernetes-jobmanager.sh ..."`` (scripts found on ``PATH``), so the entry point
runs what it is given (under ``tini``). Logs go to ``/opt/flink/log``, which any user may write; the user
``flink`` (uid 9999, as in Flink's own image) is listed in ``/etc/passwd``.

The distribution is cached under ``<toolchain cache>/flink/`` (``~/.cache/esi/tools/flink``), keyed by version
and by a digest of what this module does with it (``infra.images.root_filesystems.building``).

``python -m infra.images.flink home|image`` builds and prints the distribution's path or the image's reference.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from infra import images, toolchain
from infra.images.java_runtime import JavaRuntimeError, jvm_image
from infra.images.root_filesystems import building, digest, recipe
from infra.toolchain import commands

__all__ = [
    "ENTRYPOINT",
    "FLINK_HOME",
    "IMAGE_NAME",
    "WORD_COUNT_CLASS",
    "FlinkImageError",
    "cache_dir",
    "flink_home",
    "flink_image",
    "flink_version",
    "word_count_jar",
]

IMAGE_NAME: Final = "flink"  # esi.local/flink:<tag>
FLINK_HOME: Final = "/opt/flink"  # where Flink's Kubernetes integration expects it (conf, pod templates, artifacts)
WORD_COUNT_CLASS: Final = "org.apache.flink.streaming.examples.wordcount.WordCount"
# The parts of the wheels' pyflink/ directory that make a FLINK_HOME.
_HOME_PARTS: Final = ("bin", "conf", "lib", "opt", "plugins", "log")

ENTRYPOINT: Final = r"""#!/bin/bash
# Entry point of esi's Flink image (infra/images/flink.py): runs what it is given (Flink's Kubernetes integration
# passes `bash -c "kubernetes-jobmanager.sh ..."` or `bash -c "kubernetes-taskmanager.sh ..."`).
set -euo pipefail

# tini reaps the JVM's children and passes signals on; it is in the image, a test host may lack it.
if [[ -x /usr/bin/tini ]]; then
    exec /usr/bin/tini -s -- "$@"
fi
exec "$@"
"""


class FlinkImageError(RuntimeError):
    """Building the Flink distribution or image failed; the message says which step."""


def cache_dir() -> Path:
    return toolchain.cache_root() / "flink"


def flink_version(pins: dict[str, str] | None = None) -> str:
    return (pins or toolchain.load_pins())["flink"]


def word_count_jar(pins: dict[str, str] | None = None) -> str:
    """Where the examples jar with WordCount is, relative to FLINK_HOME."""
    return f"examples/streaming/flink-examples-streaming-{flink_version(pins)}.jar"


def _run(cmd: Sequence[str | Path], what: str, *, cwd: Path | None = None) -> str:
    return commands.run(cmd, error=FlinkImageError, what=what, timeout=900, cwd=cwd, last_lines=20)


def flink_home(pins: dict[str, str] | None = None) -> Path:
    """The Flink distribution of the pinned version, with Flink's streaming examples; built once."""
    version = flink_version(pins)
    final = cache_dir() / f"flink-{version}-{digest(version, recipe(_unpack_wheels, _add_examples))}"
    with building(final) as scratch:
        if scratch is not None:
            _unpack_wheels(version, scratch)
            _add_examples(version, scratch)
    return final


def _unpack_wheels(version: str, home: Path) -> None:
    downloads = home / ".download"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(downloads)]
    for package in ("apache-flink-libraries", "apache-flink"):
        _run([*pip, f"{package}=={version}"], f"download {package} {version} from PyPI")
    wheels = sorted(downloads.glob("apache_flink*.whl"))
    if len(wheels) != 2:
        raise FlinkImageError(f"pip downloaded {[w.name for w in wheels]} into {downloads}, not the two Flink wheels")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                parts = Path(member.filename).parts
                if len(parts) < 3 or parts[0] != "pyflink" or parts[1] not in _HOME_PARTS or member.is_dir():
                    continue
                target = home.joinpath(*parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("wb") as copy:
                    shutil.copyfileobj(source, copy)
    shutil.rmtree(downloads)
    needed = ("bin/flink", "bin/kubernetes-jobmanager.sh", "conf/config.yaml", f"lib/flink-dist-{version}.jar")
    missing = [part for part in needed if not (home / part).is_file()]
    if missing:
        raise FlinkImageError(f"the Flink {version} wheels lack {', '.join(missing)}")
    for script in (home / "bin").iterdir():
        if script.suffix in (".bat", ".cmd"):
            script.unlink()
        elif script.suffix != ".jar":
            script.chmod(0o755)


def _add_examples(version: str, home: Path) -> None:
    artifact = f"org.apache.flink:flink-examples-streaming:{version}"
    target = home / "examples" / "streaming"
    target.mkdir(parents=True)
    mvn = ["mvn", "--batch-mode", "--quiet", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={target}"]
    _run(mvn, f"download {artifact} from Maven Central", cwd=home)
    if not (home / f"examples/streaming/flink-examples-streaming-{version}.jar").is_file():
        raise FlinkImageError(f"Maven copied no {artifact} into {target}")


def flink_image(pins: dict[str, str] | None = None) -> images.BuiltImage:
    """The Flink image (``esi.local/flink:<version>-<digest>``) as a docker-archive; built once."""

    def writable_log(rootfs: Path) -> None:
        log = rootfs / FLINK_HOME.lstrip("/") / "log"
        log.mkdir(exist_ok=True)
        log.chmod(0o1777)  # the log directory of whichever user a pod runs as

    return jvm_image(
        IMAGE_NAME,
        flink_version(pins),
        flink_home(pins),
        home=FLINK_HOME,
        home_variable="FLINK_HOME",
        entrypoint=("/docker-entrypoint.sh", ENTRYPOINT),
        workdir=FLINK_HOME,
        finish=writable_log,
    )


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.images.flink", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["home", "image"], help="the distribution (FLINK_HOME) or the image")
    args = parser.parse_args(argv)
    try:
        print(flink_home() if args.what == "home" else flink_image().reference)
    except (FlinkImageError, JavaRuntimeError, images.ImageError, toolchain.ToolchainError) as err:
        print(f"python -m infra.images.flink: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
