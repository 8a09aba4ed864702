"""The Spark distribution and the Spark image, made on this machine from package registries only.

**The distribution** (``spark_home``) is what PyPI's ``pyspark`` (the ``spark`` pin of ``[tool.esi.toolchain]``)
ships: Spark's ``jars/``, ``bin/`` and ``sbin/``, laid out as a ``SPARK_HOME``. Maven Central does not carry
Spark's examples jar for Spark 2 and later, so ``examples/jars/spark-examples.jar`` holds esi's own SparkPi
(``SPARK_PI_SOURCE``), compiled with the Scala compiler that Spark's own ``jars/`` contain, under the class name
and path that manifests written for Spark's image use (``org.apache.spark.examples.SparkPi``). The local Spark
operator submits with this distribution, and the image carries the same files: one place for both.

**The image** (``spark_image``, ``esi.local/spark:<spark version>-<digest>``) is a Java runtime from Debian
(``openjdk-17-jre-headless`` with its dependencies, ``bash``, ``coreutils`` and ``tini``), unpacked with
``dpkg -x`` from packages ``apt-get`` downloads for an empty system — no maintainer script runs, so
``/etc/passwd`` is written here and Java's ``cacerts`` stays absent (the Kubernetes client trusts the
cluster's CA from the service account) — plus the distribution in ``/opt/spark`` and ``ENTRYPOINT``, the
entry point Spark's Kubernetes backend expects. ``infra.images.build_image`` makes it an image; a debootstrap
of Debian's minimal base alone took longer (1 min 47 s) and was larger (206 MB) than the whole runtime here.

Everything is cached under ``<toolchain cache>/spark/`` (``~/.cache/esi/tools/spark``), keyed by version
and by a digest of what this module does with it; a directory appears only once complete, and one builder
at a time fills it (parallel test workers wait for each other).

``python -m infra.spark_image home|image`` builds and prints the distribution's path or the image's reference.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from infra import commands, images, toolchain

__all__ = [
    "DEBIAN_PACKAGES",
    "ENTRYPOINT",
    "IMAGE_NAME",
    "JAVA_HOME",
    "SPARK_PI_CLASS",
    "SPARK_PI_JAR",
    "SPARK_PI_SOURCE",
    "SparkImageError",
    "cache_dir",
    "host_java_home",
    "image_env",
    "java_runtime",
    "spark_home",
    "spark_image",
    "spark_version",
]

IMAGE_NAME: Final = "spark"  # esi.local/spark:<tag>
JAVA_HOME: Final = "/usr/lib/jvm/java-17-openjdk-amd64"  # where Debian's openjdk-17 lives, here and in the image
IMAGE_SPARK_HOME: Final = "/opt/spark"
# What the image's root filesystem is made of; apt-get adds their dependencies.
DEBIAN_PACKAGES: Final = ("openjdk-17-jre-headless", "bash", "coreutils", "tini")
SPARK_UID: Final = 185  # the user Spark's own images run as; listed in /etc/passwd so a pod may choose it
SPARK_PI_CLASS: Final = "org.apache.spark.examples.SparkPi"
SPARK_PI_JAR: Final = "examples/jars/spark-examples.jar"  # relative to SPARK_HOME
# Trimmed from the runtime: documentation and translations no pod reads.
_PRUNED: Final = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")

SPARK_PI_SOURCE: Final = """\
package org.apache.spark.examples

import org.apache.spark.sql.SparkSession

/** Estimates pi by throwing darts at the unit square: the share inside the quarter circle is pi / 4.
  * Arguments: the number of partitions (default 2), each throwing 100000 darts, and the milliseconds each
  * partition's task waits before it throws (default 0), so that a run can be made to last. */
object SparkPi {
  def main(args: Array[String]): Unit = {
    val session = SparkSession.builder().appName("Spark Pi").getOrCreate()
    val partitions = args.headOption.map(_.toInt).getOrElse(2)
    val pause = args.lift(1).map(_.toLong).getOrElse(0L)
    val darts = math.min(100000L * partitions, Int.MaxValue.toLong).toInt
    val hits = session.sparkContext
      .parallelize(0 until darts, partitions)
      .mapPartitions { throws => Thread.sleep(pause); throws }
      .filter { _ =>
        val (x, y) = (2 * math.random() - 1, 2 * math.random() - 1)
        x * x + y * y <= 1
      }
      .count()
    println(s"Pi is roughly ${4.0 * hits / darts}")
    session.stop()
  }
}
"""

# The container entry point of the image. Spark's Kubernetes backend starts the driver pod with
# `driver <spark-submit arguments>` and each executor pod with `executor`, and passes the rest in the
# environment (the names are those of Spark's KubernetesConf / BasicExecutorFeatureStep).
ENTRYPOINT: Final = r"""#!/bin/bash
# Entry point of esi's Spark image (infra/spark_image.py).
#   driver ARGS...  run spark-submit in client mode, bound to and reached at SPARK_DRIVER_BIND_ADDRESS (the
#                   pod's IP)
#   executor        run an executor backend from SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, SPARK_EXECUTOR_CORES,
#                   SPARK_EXECUTOR_MEMORY, SPARK_APPLICATION_ID, SPARK_EXECUTOR_POD_IP,
#                   SPARK_EXECUTOR_POD_NAME and SPARK_RESOURCE_PROFILE_ID; JVM options from
#                   SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order
#   anything else   run as given
set -euo pipefail

# Hadoop's login needs a user name: a pod running as a uid that /etc/passwd lacks gets an entry.
uid=$(id -u)
known=
while IFS=: read -r _ _ entry _; do
    if [[ $entry == "$uid" ]]; then known=1; fi
done </etc/passwd
if [[ -z $known && -w /etc/passwd ]]; then
    printf '%s:x:%s:%s:%s:%s:/bin/false\n' "$uid" "$uid" "$(id -g)" "${SPARK_USER_NAME:-anonymous uid}" \
        "$SPARK_HOME" >>/etc/passwd
fi

# The configuration directory (the driver's spark.properties is mounted there) comes before the jars.
classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
if [[ -n ${HADOOP_CONF_DIR:-} ]]; then classpath="$HADOOP_CONF_DIR:$classpath"; fi
if [[ -n ${SPARK_EXTRA_CLASSPATH:-} ]]; then classpath="$classpath:$SPARK_EXTRA_CLASSPATH"; fi

java_opts=()
while IFS= read -r name; do
    java_opts+=("${!name}")
done < <(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n)

case "${1:-}" in
driver)
    shift
    # Executors reach the driver at its pod's IP, not at its Service's DNS name: every cluster routes pod IPs,
    # not every one resolves Service names (a local cluster without DNS). --conf wins over spark.properties.
    command=("$SPARK_HOME/bin/spark-submit" --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
        --conf "spark.driver.host=$SPARK_DRIVER_BIND_ADDRESS" --deploy-mode client "$@")
    ;;
executor)
    command=("$JAVA_HOME/bin/java" "${java_opts[@]}" "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY"
        -cp "$classpath${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"
        org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
        --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES"
        --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP"
        --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" --podName "$SPARK_EXECUTOR_POD_NAME")
    ;;
*)
    command=("$@")
    ;;
esac

# tini reaps the JVM's children and passes signals on; it is in the image, a test host may lack it.
if [[ -x /usr/bin/tini ]]; then
    exec /usr/bin/tini -s -- "${command[@]}"
fi
exec "${command[@]}"
"""

_PASSWD: Final = (
    f"root:x:0:0:root:/root:/bin/bash\nspark:x:{SPARK_UID}:{SPARK_UID}:spark:{IMAGE_SPARK_HOME}:/bin/false\n"
)
_GROUP: Final = f"root:x:0:\nspark:x:{SPARK_UID}:\n"


class SparkImageError(RuntimeError):
    """Building the Spark distribution, the Java runtime or the image failed; the message says which step."""


def cache_dir() -> Path:
    return toolchain.cache_root() / "spark"


def spark_version(pins: dict[str, str] | None = None) -> str:
    return (pins or toolchain.load_pins())["spark"]


def _digest(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:10]


def _run(cmd: Sequence[str | Path], what: str, *, timeout: float = 900, cwd: Path | None = None) -> str:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return commands.run(cmd, error=SparkImageError, what=what, timeout=timeout, cwd=cwd, env=env, last_lines=20)


@contextlib.contextmanager
def _building(final: Path) -> Iterator[Path | None]:
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
        scratch.chmod(0o755)  # it becomes a root directory or SPARK_HOME: every user reads it
        try:
            yield scratch
            scratch.rename(final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def host_java_home() -> Path:
    """The Java runtime on this machine that spark-submit and the Scala compiler run on."""
    java_home = Path(JAVA_HOME)
    if not os.access(java_home / "bin" / "java", os.X_OK):
        raise SparkImageError(
            f"no Java runtime in {java_home}: install Debian's openjdk-17-jre-headless "
            "(python -m infra.node_packages ensure)"
        )
    return java_home


def spark_home(pins: dict[str, str] | None = None) -> Path:
    """The Spark distribution of the pinned version, with esi's SparkPi; built once."""
    version = spark_version(pins)
    recipe = _recipe(_unpack_pyspark, _compile_spark_pi)
    final = cache_dir() / f"spark-{version}-{_digest(version, SPARK_PI_SOURCE, recipe)}"
    with _building(final) as scratch:
        if scratch is not None:
            _unpack_pyspark(version, scratch)
            _compile_spark_pi(scratch)
    return final


def _recipe(*steps: Callable[..., object]) -> str:
    """What decides the files a build makes: the source of its steps (a changed step builds anew)."""
    return "".join(inspect.getsource(step) for step in steps)


def _unpack_pyspark(version: str, home: Path) -> None:
    downloads = home / ".download"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    _run([*pip, "--dest", str(downloads), f"pyspark=={version}"], f"download pyspark {version} from PyPI")
    archive = downloads / f"pyspark-{version}.tar.gz"
    if not archive.is_file():
        raise SparkImageError(f"pip downloaded no {archive.name} into {downloads}")
    members = [f"pyspark-{version}/deps/{part}" for part in ("bin", "sbin", "jars", "licenses")]
    _run(["tar", "-xzf", archive, "-C", home, "--strip-components=2", *members], f"unpack {archive.name}")
    shutil.rmtree(downloads)
    for windows_script in (home / "bin").glob("*.cmd"):
        windows_script.unlink()
    (home / "conf").mkdir()


def _compile_spark_pi(home: Path) -> None:
    java = host_java_home() / "bin" / "java"
    jars = home / "jars"
    compiler = [
        next(jars.glob(f"{name}-2.*.jar"), None) for name in ("scala-compiler", "scala-library", "scala-reflect")
    ]
    if None in compiler:
        raise SparkImageError(f"Spark's jars in {jars} hold no Scala compiler; cannot compile SparkPi")
    source_dir = home / ".spark-pi"
    source_dir.mkdir()
    (source_dir / "SparkPi.scala").write_text(SPARK_PI_SOURCE)
    target = home / SPARK_PI_JAR
    target.parent.mkdir(parents=True)
    scalac = [str(java), "-cp", ":".join(str(j) for j in compiler), "scala.tools.nsc.Main", "-nowarn"]
    _run(
        [*scalac, "-classpath", f"{jars}/*", "-d", str(target), str(source_dir / "SparkPi.scala")],
        "compile SparkPi with Spark's Scala compiler",
    )
    shutil.rmtree(source_dir)


def java_runtime() -> Path:
    """A root filesystem with Debian's Java runtime, bash, coreutils and tini; built once."""
    recipe = _recipe(_unpack_debian)
    final = cache_dir() / f"jre-{_digest(*DEBIAN_PACKAGES, *_PRUNED, _PASSWD, _GROUP, recipe)}"
    with _building(final) as scratch:
        if scratch is not None:
            _unpack_debian(scratch)
    return final


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
        except SparkImageError:
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
    if not os.access(rootfs / JAVA_HOME.lstrip("/") / "bin" / "java", os.X_OK):
        raise SparkImageError(f"Debian's packages unpacked, but {JAVA_HOME}/bin/java is not in {rootfs}")


def image_env() -> dict[str, str]:
    """The image's environment."""
    return {
        "JAVA_HOME": JAVA_HOME,
        "SPARK_HOME": IMAGE_SPARK_HOME,
        "PATH": f"{IMAGE_SPARK_HOME}/bin:{JAVA_HOME}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
    }


def _link_tree(source: Path, target: Path) -> None:
    """Copy ``source`` into ``target`` as hard links (same file system: no data is copied)."""
    shutil.copytree(source, target, symlinks=True, copy_function=os.link, dirs_exist_ok=True)


def spark_image(pins: dict[str, str] | None = None) -> images.BuiltImage:
    """The Spark image (``esi.local/spark:<version>-<digest>``) as a docker-archive; built once."""
    version = spark_version(pins)
    home, runtime = spark_home(pins), java_runtime()
    contents = (runtime / "debian-packages.txt").read_text()
    tag = f"{version}-{_digest(home.name, contents, ENTRYPOINT)}"

    def populate(rootfs: Path) -> None:
        _link_tree(runtime, rootfs)
        (rootfs / "debian-packages.txt").unlink()
        _link_tree(home, rootfs / IMAGE_SPARK_HOME.lstrip("/"))
        (rootfs / IMAGE_SPARK_HOME.lstrip("/") / "work-dir").mkdir()
        entrypoint = rootfs / "opt" / "entrypoint.sh"
        entrypoint.write_text(ENTRYPOINT)
        entrypoint.chmod(0o755)

    return images.build_image(
        IMAGE_NAME,
        tag,
        populate,
        entrypoint=["/opt/entrypoint.sh"],
        env=image_env(),
        workdir=f"{IMAGE_SPARK_HOME}/work-dir",
    )


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.spark_image", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["home", "image"], help="the distribution (SPARK_HOME) or the image")
    args = parser.parse_args(argv)
    try:
        if args.what == "home":
            print(spark_home())
        else:
            built = spark_image()
            print(f"{built.reference} {built.archive}")
    except (SparkImageError, images.ImageError, toolchain.ToolchainError) as err:
        print(f"infra.spark_image: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
