"""The Spark distribution and the Spark image, made on this machine from package registries only.

**The distribution** (``spark_home``) is what PyPI's ``pyspark`` (the ``spark`` pin of ``[tool.esi.toolchain]``)
ships: Spark's ``jars/``, ``bin/`` and ``sbin/``, laid out as a ``SPARK_HOME``. Maven Central does not carry
Spark's examples jar for Spark 2 and later, so ``examples/jars/spark-examples.jar`` holds esi's own examples
(``EXAMPLE_SOURCES``, ``spark_examples/*.scala``: SparkPi, CPU-bound; GroupByTest, shuffle-heavy; SparkLR,
iterative over cached data), compiled with the Scala compiler that Spark's own ``jars/`` contain, under the class
names and path that manifests written for Spark's image use (``org.apache.spark.examples.SparkPi``). The local Spark
operator submits with this distribution, and the image carries the same files: one place for both.

**The image** (``spark_image``, ``esi.local/spark:<spark version>-<digest>``) is Debian's Java runtime
(``infra.images.java_runtime``) plus the distribution in ``/opt/spark`` and ``ENTRYPOINT``, the entry point Spark's
Kubernetes backend expects. ``infra.images.build_image`` makes it an image; a debootstrap of Debian's minimal
base alone took longer (1 min 47 s) and was larger (206 MB) than the whole runtime.

The distribution is cached under ``<toolchain cache>/spark/`` (``~/.cache/esi/tools/spark``), keyed by version
and by a digest of what this module does with it (``infra.images.root_filesystems.building``).

``python -m infra.images.spark home|image`` builds and prints the distribution's path or the image's reference.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from infra import images, toolchain
from infra.images.java_runtime import JavaRuntimeError, host_java_home, jvm_image
from infra.images.root_filesystems import building, digest, recipe
from infra.toolchain import commands

__all__ = [
    "ENTRYPOINT",
    "EXAMPLES_JAR",
    "EXAMPLE_SOURCES",
    "IMAGE_NAME",
    "SPARK_PI_CLASS",
    "SparkImageError",
    "cache_dir",
    "spark_home",
    "spark_image",
    "spark_version",
]

IMAGE_NAME: Final = "spark"  # esi.local/spark:<tag>
IMAGE_SPARK_HOME: Final = "/opt/spark"
SPARK_PI_CLASS: Final = "org.apache.spark.examples.SparkPi"
EXAMPLES_JAR: Final = "examples/jars/spark-examples.jar"  # relative to SPARK_HOME

EXAMPLE_SOURCES: Final = tuple(sorted((Path(__file__).parent / "spark_examples").glob("*.scala")))

# The container entry point of the image. Spark's Kubernetes backend starts the driver pod with
# `driver <spark-submit arguments>` and each executor pod with `executor`, and passes the rest in the
# environment (the names are those of Spark's KubernetesConf / BasicExecutorFeatureStep).
ENTRYPOINT: Final = r"""#!/bin/bash
# Entry point of esi's Spark image (infra/images/spark.py).
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


class SparkImageError(RuntimeError):
    """Building the Spark distribution, the Java runtime or the image failed; the message says which step."""


def cache_dir() -> Path:
    return toolchain.cache_root() / "spark"


def spark_version(pins: dict[str, str] | None = None) -> str:
    return (pins or toolchain.load_pins())["spark"]


def _run(cmd: Sequence[str | Path], what: str, *, timeout: float = 900, cwd: Path | None = None) -> str:
    return commands.run(cmd, error=SparkImageError, what=what, timeout=timeout, cwd=cwd, last_lines=20)


def spark_home(pins: dict[str, str] | None = None) -> Path:
    """The Spark distribution of the pinned version, with esi's examples; built once."""
    version = spark_version(pins)
    steps = recipe(_unpack_pyspark, _compile_examples)
    sources = "".join(source.read_text() for source in EXAMPLE_SOURCES)
    final = cache_dir() / f"spark-{version}-{digest(version, sources, steps)}"
    with building(final) as scratch:
        if scratch is not None:
            _unpack_pyspark(version, scratch)
            _compile_examples(scratch)
    return final


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


def _compile_examples(home: Path) -> None:
    java = host_java_home() / "bin" / "java"
    jars = home / "jars"
    compiler = [
        next(jars.glob(f"{name}-2.*.jar"), None) for name in ("scala-compiler", "scala-library", "scala-reflect")
    ]
    if None in compiler:
        raise SparkImageError(f"Spark's jars in {jars} hold no Scala compiler; cannot compile the examples")
    target = home / EXAMPLES_JAR
    target.parent.mkdir(parents=True)
    scalac = [str(java), "-cp", ":".join(str(j) for j in compiler), "scala.tools.nsc.Main", "-nowarn"]
    _run(
        [*scalac, "-classpath", f"{jars}/*", "-d", str(target), *(str(source) for source in EXAMPLE_SOURCES)],
        "compile esi's Spark examples with Spark's Scala compiler",
    )


def spark_image(pins: dict[str, str] | None = None) -> images.BuiltImage:
    """The Spark image (``esi.local/spark:<version>-<digest>``) as a docker-archive; built once."""

    def work_dir(rootfs: Path) -> None:
        (rootfs / IMAGE_SPARK_HOME.lstrip("/") / "work-dir").mkdir()

    return jvm_image(
        IMAGE_NAME,
        spark_version(pins),
        spark_home(pins),
        home=IMAGE_SPARK_HOME,
        home_variable="SPARK_HOME",
        entrypoint=("/opt/entrypoint.sh", ENTRYPOINT),
        workdir=f"{IMAGE_SPARK_HOME}/work-dir",
        finish=work_dir,
    )


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.images.spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["home", "image"], help="the distribution (SPARK_HOME) or the image")
    args = parser.parse_args(argv)
    try:
        if args.what == "home":
            print(spark_home())
        else:
            built = spark_image()
            print(f"{built.reference} {built.archive}")
    except (SparkImageError, JavaRuntimeError, images.ImageError, toolchain.ToolchainError) as err:
        print(f"infra.images.spark: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
