"""Session fixtures for the simulated Spark and Flink operators on the shared local cluster.

Not in conftest.py: a test module that needs them imports them, which makes pytest see them there::

    from tests.integration.sim_fixtures import esi_sim, sim_crds  # noqa: F401 (fixtures)

``sim_crds`` installs the SparkApplication and FlinkDeployment CRDs; ``sim_garbage_collected`` also waits
until the garbage collector follows owner references to them (see there); ``esi_sim`` also runs
``python -m sim`` against the cluster with ``SIM_ARGS``: one process for the whole session and every
pytest worker (the first to need it starts it, under a lock), as ``esi_operators`` does for esi's
reconcilers. A job the co-location table does not know runs ``DEFAULT_RUNTIME`` x ``TIME_SCALE`` seconds.
Several modules importing the fixtures may each run them once; both are idempotent.
"""

from __future__ import annotations

import itertools
import json
import sys
import time

import pytest
from lightkube.generic_resource import create_namespaced_resource

from infra.local_cluster import LocalCluster
from infra.stacks import processes
from infra.toolchain.commands import exclusive
from sim.crds import FLINK, SPARK, application_crds
from tests.integration.kube import ensure_process

__all__ = [
    "DEFAULT_RUNTIME",
    "SIM_ARGS",
    "TIME_SCALE",
    "FlinkDeployment",
    "SparkApplication",
    "esi_sim",
    "sim_crds",
    "sim_garbage_collected",
]

TIME_SCALE = 0.01  # the thesis' 444 s run of batchjob-sample3 takes 4.44 s
DEFAULT_RUNTIME = 60.0  # seconds, before scaling: 0.6 s
SIM_ARGS = (f"--time-scale={TIME_SCALE}", f"--default-runtime={DEFAULT_RUNTIME}")

SparkApplication = create_namespaced_resource(SPARK.group, SPARK.version, SPARK.kind, SPARK.plural)
FlinkDeployment = create_namespaced_resource(FLINK.group, FLINK.version, FLINK.kind, FLINK.plural)


@pytest.fixture(scope="session")
def sim_crds(cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with the SparkApplication and FlinkDeployment CRDs installed and established."""
    crds = application_crds()
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=items)
    cluster.wait_for_crds([c["metadata"]["name"] for c in crds])
    return cluster


@pytest.fixture(scope="session")
def sim_garbage_collected(sim_crds: LocalCluster) -> LocalCluster:
    """The cluster with the application CRDs, once deleting an application deletes what it owns.

    The garbage collector learns of new resource kinds only when it next re-reads the API's discovery
    (every 30 s, not configurable), and until then keeps retrying, with growing back-off, every object
    owned by an application; a test that deletes an application right after the CRDs were installed would
    wait up to a minute for its pods to go. This probes until an object owned by a fresh application is
    collected: at most ~30 s, once per session.
    """
    ready = sim_crds.directory / "sim-gc.ready"
    with exclusive(sim_crds.directory / "sim-gc.lock"):
        if not ready.exists():
            _wait_for_garbage_collection(sim_crds)
            ready.touch()
    return sim_crds


def _wait_for_garbage_collection(cluster: LocalCluster, timeout: float = 90) -> None:
    """Every second a new probe (each new, so none is stuck in back-off): an application and a ConfigMap it
    owns; the application is deleted at once. Done when any probe's ConfigMap is gone."""
    label = "esi.test/sim-gc-probe"
    deadline = time.monotonic() + timeout
    probes: list[str] = []
    try:
        for number in itertools.count():
            name = f"sim-gc-probe-{number}"
            app = {
                "apiVersion": FLINK.api_version,
                "kind": FLINK.kind,
                "metadata": {"name": name, "namespace": "default", "labels": {label: "true"}},
                "spec": {"job": {"jarURI": "local:///probe.jar"}},
            }
            uid = cluster.kubectl("create", "-f", "-", "-o", "jsonpath={.metadata.uid}", input_text=json.dumps(app))
            owner = {"apiVersion": FLINK.api_version, "kind": FLINK.kind, "name": name, "uid": uid}
            config_map = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {label: "true"},
                    "ownerReferences": [owner],
                },
            }
            cluster.kubectl("create", "-f", "-", input_text=json.dumps(config_map))
            cluster.kubectl("delete", FLINK.crd_name, name, "-n", "default", "--wait=false")
            probes.append(f"configmap/{name}")
            left = cluster.kubectl("get", "configmap", "-n", "default", "-l", label, "-o", "name").split()
            if len(left) < len(probes):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the garbage collector did not follow owner references to {FLINK.kind}s")
            time.sleep(1)
    finally:
        cluster.kubectl("delete", "configmap", "-n", "default", "-l", label, "--wait=false")


@pytest.fixture(scope="session")
def esi_sim(sim_crds: LocalCluster) -> LocalCluster:
    """The simulated Spark/Flink operators (``python -m sim``) running against the session's cluster."""
    ensure_process(
        sim_crds,
        processes.SIM,
        lambda port: processes.sim_command(
            sys.executable, kubeconfig=sim_crds.kubeconfig, liveness=processes.SIM.live_url(port), more=SIM_ARGS
        ),
    )
    return sim_crds
