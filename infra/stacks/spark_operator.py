"""The real kubeflow Spark operator, run out of cluster against a local cluster.

The controller binary and its CRDs (``SparkApplication``, ``ScheduledSparkApplication`` and, because the
controller also watches it, ``SparkConnect``) come from one build of ``github.com/kubeflow/spark-operator/v2``
at the ``spark-operator`` pin (``tools/recipes/spark-operator.sh``). The controller submits an application by
running ``$SPARK_HOME/bin/spark-submit`` on this machine — the distribution of ``infra.images.spark``, on the
host's Java runtime — against the API server of ``KUBERNETES_SERVICE_HOST``/``PORT``, authenticated by the
cluster's kubeconfig (``KUBECONFIG``: the controller's client and Spark's both read it).

**No webhook.** The operator's mutating webhook is not started. What only the webhook applies to pods
(``priorityClassName``, affinity, tolerations of the SparkApplication's ``driver``/``executor`` fields) reaches
executors through ``executor.template`` instead: the operator hands it to spark-submit as the executor pod
template (``spark.kubernetes.executor.podTemplateFile``), and Spark keeps a template's priority class and
affinity. Labels, scheduler name, cores and memory need neither: the operator passes them as Spark
configuration.

**Namespaces.** The controller manages applications only in the namespaces it is given (``--namespaces``);
the simulated operator (``python -m sim``) must leave those alone.

**In a cluster** (the cluster stack): ``operator_image`` is the release's image made here — the Spark image's
Java runtime and distribution, the same controller binary, run under ``tini`` — and ``chart_dir`` the release's
own Helm chart, from the module's sources (no chart repository).

**Drivers.** A driver creates its executors (pods), their headless Service, ConfigMaps and, when asked, PVCs
in its own namespace, as the ServiceAccount of ``driver.serviceAccount``; ``driver_rbac`` is that account
with exactly those rights (the rules of the operator chart's ``spark`` Role).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from infra import images, toolchain
from infra.images.java_runtime import SPARK_UID, host_java_home, host_java_missing, jvm_image
from infra.images.spark import IMAGE_SPARK_HOME, spark_home, spark_version
from infra.local_cluster import ClusterError, LocalCluster, free_port
from infra.local_cluster.real_node import pod_api_server_url
from infra.toolchain import commands

__all__ = [
    "DRIVER_SERVICE_ACCOUNT",
    "PROCESS",
    "SparkOperatorError",
    "chart_dir",
    "controller_command",
    "crd_manifests",
    "driver_rbac",
    "install_crds",
    "operator_argv",
    "operator_env",
    "operator_image",
    "spark_defaults",
    "start_operator",
    "unavailable_reason",
]

PROCESS: Final = "spark-operator"
DRIVER_SERVICE_ACCOUNT: Final = "spark-driver"
_DRIVER_RESOURCES: Final = ("pods", "services", "configmaps", "persistentvolumeclaims")
_DRIVER_VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class SparkOperatorError(ClusterError):
    """The Spark operator could not be installed or started; the message says why and where its log is."""


def unavailable_reason() -> str | None:
    """Why the Spark operator cannot run on this machine (no Java runtime, not built), or None when it can."""
    if (missing := host_java_missing()) is not None:
        return missing
    if toolchain.missing(tools=[t for t in toolchain.TOOLS if t.name == "spark-operator"]):
        return "the Spark operator is not built: run `make tools`"
    return None


def crd_dir(pins: dict[str, str] | None = None) -> Path:
    """The CRDs of the built operator release (the recipe puts them beside its ``bin/``)."""
    return toolchain.binary("spark-operator", pins).parent.parent / "crds"


def chart_dir(pins: dict[str, str] | None = None) -> Path:
    """Where ``make tools`` puts the Helm chart of the pinned operator release (``Chart.yaml``, ``templates/``)."""
    pins = pins or toolchain.load_pins()
    (tool,) = [t for t in toolchain.TOOLS if t.name == "spark-operator"]
    return toolchain.install_dir(tool, pins) / "chart"


# The release image's entry point, in esi's words: the controller (or webhook) under tini, its arguments the pod's.
OPERATOR_ENTRYPOINT: Final = """#!/bin/bash
exec /usr/bin/tini -s -- /usr/bin/spark-operator "$@"
"""


def operator_image(pins: dict[str, str] | None = None) -> images.BuiltImage:
    """The operator release's image (``esi.local/spark-operator:<release>-<recipe>-spark<version>-<digest>``):
    the Spark image's runtime and distribution with the controller binary, running as Spark's user; built once."""
    binary = toolchain.binary("spark-operator", pins)
    build = binary.parent.parent.name.removeprefix("spark-operator-")  # the release and its recipe's digest

    def finish(rootfs: Path) -> None:
        shutil.copy(binary, rootfs / "usr" / "bin" / "spark-operator")  # with its mode
        # Where the webhook keeps the certificates it makes itself, and Spark's home: the operator's user's.
        for directory in ("etc/k8s-webhook-server/serving-certs", "home/spark"):
            (rootfs / directory).mkdir(parents=True)
            os.chown(rootfs / directory, SPARK_UID, SPARK_UID)

    return jvm_image(
        "spark-operator",
        f"{build}-spark{spark_version(pins)}",
        spark_home(pins),
        home=IMAGE_SPARK_HOME,
        home_variable="SPARK_HOME",
        entrypoint=("/usr/bin/entrypoint.sh", OPERATOR_ENTRYPOINT),
        workdir="/home/spark",
        finish=finish,
        user=f"{SPARK_UID}:{SPARK_UID}",
    )


def crd_manifests(pins: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every CRD of the pinned operator release, as objects."""
    manifests = [yaml.safe_load(path.read_text()) for path in sorted(crd_dir(pins).glob("*.yaml"))]
    return [m for m in manifests if isinstance(m, dict)]


def install_crds(cluster: LocalCluster, *, timeout: float = 60) -> list[str]:
    """Apply the operator's CRDs (server-side, taking over fields others own) and wait until they are served."""
    crds = crd_manifests()
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=items)
    names = [str(crd["metadata"]["name"]) for crd in crds]
    cluster.wait_for_crds(names, timeout=timeout)
    return names


def driver_rbac(namespace: str, name: str = DRIVER_SERVICE_ACCOUNT) -> list[dict[str, Any]]:
    """The ServiceAccount a Spark driver in ``namespace`` runs as, with the Role it needs and its binding."""
    metadata = {"name": name, "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata,
            "rules": [{"apiGroups": [""], "resources": list(_DRIVER_RESOURCES), "verbs": list(_DRIVER_VERBS)}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
    ]


def operator_argv(binary: Path, namespaces: Sequence[str], *, kubeconfig: Path, health_port: int) -> list[str]:
    """The controller's command line: only ``namespaces``, no leader election, metrics off, probes on loopback."""
    if not namespaces or any(not n for n in namespaces):
        raise SparkOperatorError("the Spark operator needs the namespaces it manages: all of them would include sim's")
    return [
        str(binary),
        "controller",
        "start",
        f"--kubeconfig={kubeconfig}",
        f"--namespaces={','.join(namespaces)}",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
        "--metrics-bind-address=0",
        "--leader-election=false",
        "--zap-log-level=info",
    ]


def operator_env(
    base: Mapping[str, str], *, server: str, kubeconfig: Path, spark: Path, java_home: Path, conf: Path
) -> dict[str, str]:
    """The controller's environment: where spark-submit and its configuration are, and the API server it
    submits to."""
    url = urlsplit(server)
    if url.scheme != "https" or not url.hostname:
        raise SparkOperatorError(f"spark-submit needs an https API server URL, not {server!r}")
    return {
        **base,
        "SPARK_HOME": str(spark),
        "SPARK_CONF_DIR": str(conf),
        "JAVA_HOME": str(java_home),
        "PATH": f"{java_home / 'bin'}{os.pathsep}{base.get('PATH', '/usr/bin:/bin')}",
        "KUBECONFIG": str(kubeconfig),
        # The controller builds spark-submit's master URL k8s://https://HOST:PORT from these.
        "KUBERNETES_SERVICE_HOST": url.hostname,
        "KUBERNETES_SERVICE_PORT": str(url.port or 443),
    }


def spark_defaults(pod_api_server: str) -> str:
    """spark-submit's defaults on a local cluster: drivers reach the API server at its pod-reachable address
    (no ``kubernetes`` Service behind a proxy, no cluster DNS). A SparkApplication's ``sparkConf`` still wins."""
    return f"spark.kubernetes.driver.master {pod_api_server}\n"


def controller_command(
    cluster: LocalCluster, namespaces: Sequence[str], *, health_port: int
) -> tuple[list[str], dict[str, str]]:
    """The controller's command line and environment for ``cluster`` (serving): its configuration directory
    written under the cluster's directory."""
    conf = cluster.directory / PROCESS / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(spark_defaults(pod_api_server_url(cluster)))
    argv = operator_argv(
        toolchain.binary("spark-operator"), namespaces, kubeconfig=cluster.kubeconfig, health_port=health_port
    )
    env = operator_env(
        os.environ,
        server=cluster.server(),
        kubeconfig=cluster.kubeconfig,
        spark=spark_home(),
        java_home=host_java_home(),
        conf=conf,
    )
    return argv, env


def start_operator(
    cluster: LocalCluster, namespaces: Sequence[str], *, name: str = PROCESS, timeout: float = 90
) -> int:
    """Install the CRDs, start the controller for ``namespaces`` and wait until it is ready; its pid.

    The process belongs to the cluster (``LocalCluster.start_process``, log in ``logs/<name>.log``).
    """
    install_crds(cluster)
    port = free_port()
    argv, env = controller_command(cluster, namespaces, health_port=port)
    pid = cluster.start_process(name, argv, env=env)
    cluster.await_process(
        name, lambda: commands.answers(f"http://127.0.0.1:{port}/readyz"), timeout=timeout, what="the Spark operator"
    )
    return pid


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.stacks.spark_operator",
        description="The real Spark operator's controller for namespaces of a local cluster with real nodes, and "
        "the release's image for a cluster (built here, no registry or daemon; pushed with skopeo).",
    )
    commands_ = parser.add_subparsers(dest="command", required=True)
    controller = commands_.add_parser(
        "controller", help="become the controller for namespaces of a local cluster (its CRDs must be installed)"
    )
    controller.add_argument("--cluster", required=True, help="the local cluster's name")
    controller.add_argument("--workdir", type=Path, required=True, help="the local cluster's work directory")
    controller.add_argument(
        "--namespace", dest="namespaces", action="append", required=True, help="a namespace to manage (repeat)"
    )
    controller.add_argument("--health-port", type=int, required=True, help="its probes on 127.0.0.1:PORT (/readyz)")
    images.add_image_commands(commands_, "registry.example.org/team/spark-operator:2.4.0")
    args = parser.parse_args(argv)
    try:
        if args.command == "controller":
            if reason := unavailable_reason():
                parser.error(reason)
            cluster = LocalCluster(args.cluster, args.workdir)
            command, env = controller_command(cluster, args.namespaces, health_port=args.health_port)
            os.execve(command[0], command, env)  # noqa: S606 (the pinned controller, built here)
        images.run_image_command(args, operator_image(), "set it as esi:sparkOperator's values.image")
    except (ClusterError, images.ImageError, toolchain.ToolchainError) as err:
        print(f"python -m infra.stacks.spark_operator: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
