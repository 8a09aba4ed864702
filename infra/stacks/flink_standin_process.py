"""esi's local stand-in for the Flink Kubernetes operator (``python -m flink_standin``), started for a local cluster.

It submits FlinkDeployments with the pinned Flink distribution (``infra.images.flink.flink_home``) on this
machine's Java runtime, against the cluster's API server; its JobManagers and TaskManagers run the Flink
image on the cluster's real nodes (import it there: ``infra.images.import_image``). It handles only the
namespaces it is given: the simulator (``python -m sim``) must leave those alone.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from flink_standin.controller import READY_LINE
from infra.images.flink import flink_home
from infra.images.java_runtime import host_java_home, host_java_missing
from infra.local_cluster import ClusterError, LocalCluster
from infra.stacks.processes import flink_standin_command

__all__ = ["PROCESS", "FlinkStandInError", "standin_argv", "start_standin", "unavailable_reason"]

PROCESS: Final = "flink-standin"


class FlinkStandInError(ClusterError):
    """The stand-in could not be started; the message says why and where its log is."""


def unavailable_reason() -> str | None:
    """Why the stand-in cannot run on this machine (no Java runtime for Flink's client), or None when it can."""
    return host_java_missing()


def standin_argv(cluster: LocalCluster, namespaces: Sequence[str], *, health: str | None = None) -> list[str]:
    """The stand-in's command line for ``cluster`` and ``namespaces``, serving ``health`` if given (builds the
    Flink distribution if needed). The cluster need not run yet: the stand-in reads where pods reach the API
    server when it starts."""
    if not namespaces or any(not n for n in namespaces):
        raise FlinkStandInError("the Flink stand-in needs the namespaces it handles: all of them would include sim's")
    return flink_standin_command(
        sys.executable,
        kubeconfig=cluster.kubeconfig,
        namespaces=namespaces,
        flink_home=flink_home(),
        java_home=host_java_home(),
        workdir=cluster.directory / PROCESS,
        health=health or None,
    )


def start_standin(cluster: LocalCluster, namespaces: Sequence[str], *, name: str = PROCESS, timeout: float = 60) -> int:
    """Start the stand-in for ``namespaces`` and wait until it has read the cluster once; its pid. It belongs to
    the cluster (log in ``logs/<name>.log``)."""
    argv = standin_argv(cluster, namespaces)
    (cluster.directory / PROCESS).mkdir(parents=True, exist_ok=True)
    pid = cluster.start_process(name, argv)
    log = cluster.logs_dir / f"{name}.log"
    cluster.await_process(
        name,
        lambda: log.exists() and READY_LINE in log.read_text(errors="replace"),
        timeout=timeout,
        what="the Flink stand-in",
    )
    return pid
