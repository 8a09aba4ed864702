"""Fixtures for tests against the shared local cluster: an API client and a namespace per test."""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Namespace, Node
from lightkube.resources.scheduling_v1 import PriorityClass

from api.extender.app import create_extender_app
from api.extender.slot_index import SlotIndex
from api.threaded import serve_in_thread
from esi.objects import priority
from esi.objects.names import SCHEDULER_NAME
from esi.resources.crds import DEFINITIONS, crd
from infra.local_cluster import LocalCluster, NodeSpec, free_port
from infra.stacks import processes
from infra.stacks.second_scheduler import SecondScheduler, SecondSchedulerSettings
from infra.toolchain.commands import exclusive
from tests.integration.admission import KubeletAdmission
from tests.integration.kube import ensure_process, namespace_manifest, priority_class, wait_for
from tests.integration.sim_fixtures import esi_sim, sim_crds, sim_garbage_collected  # noqa: F401 (fixtures)


@pytest.fixture(scope="session")
def client(cluster: LocalCluster) -> Iterator[Client]:
    api = Client(config=KubeConfig.from_file(cluster.kubeconfig), field_manager="esi-tests")
    yield api
    api.close()


@pytest.fixture(scope="session")
def kubelet_admission(client: Client) -> KubeletAdmission:
    """The pods KWOK refused as a kubelet's admission does, in the session's cluster."""
    return KubeletAdmission(client)


@pytest.fixture
def namespace(client: Client, kubelet_admission: KubeletAdmission, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test; deleted (with everything in it) afterwards. The test fails when
    KWOK refused a pod in it as a kubelet's admission does (``kubelet_admission``), unless the test expects
    refusals."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{slug}-{uuid.uuid4().hex[:5]}"
    client.create(namespace_manifest(name))
    yield name
    refused = kubelet_admission.unexpected_in(name)
    client.delete(Namespace, name)
    if refused:
        shown = "\n  ".join(str(r) for r in refused[:10])
        pytest.fail(f"a kubelet's admission refused {len(refused)} pod(s) on KWOK nodes:\n  {shown}")


@pytest.fixture
def unique() -> str:
    """A short suffix for cluster-scoped names (nodes, priority classes, scheduler names)."""
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="session")
def esi_priority_classes(cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with esi's ghost and executor priority classes."""
    install_priority_classes(cluster)
    return cluster


def install_priority_classes(cluster: LocalCluster) -> None:
    """esi's ghost and executor priority classes, applied to ``cluster``."""
    items = priority.priority_classes()
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )


@pytest.fixture(scope="session")
def esi_operators(
    esi_crds: LocalCluster,
    esi_priority_classes: LocalCluster,
    sim_crds: LocalCluster,  # noqa: F811 (the fixture imported above)
) -> LocalCluster:
    """esi's reconcilers (``python -m operators``) running against the session's cluster.

    The SparkApplication and FlinkDeployment CRDs come first: kopf looks for the kinds it handles when it
    starts, and reconcilers started before them never watched applications (Schedulings then hung).

    They watch the whole cluster, so all pytest workers share one process: the first starts it.
    """
    ensure_operators(esi_crds)
    return esi_crds


# Seconds a run may wait to be Running before the session's operators call it Stalled: short, so that a test
# sees a stall happen; runs of simulated jobs are Running within seconds.
STALLED_AFTER = 30


def ensure_operators(cluster: LocalCluster) -> None:
    """Start ``python -m operators`` for the cluster unless it runs; return once it reports live."""
    ensure_process(
        cluster,
        processes.OPERATORS,
        lambda port: processes.operators_command(
            sys.executable,
            kubeconfig=cluster.kubeconfig,
            liveness=processes.OPERATORS.live_url(port),
            stalled_after=STALLED_AFTER,
        ),
    )


def kill_operators(cluster: LocalCluster) -> None:
    """What a crash does: the process is killed at once (no SIGTERM grace), whatever it was doing."""
    with exclusive(cluster.directory / f"{processes.OPERATORS.name}.lock"):  # ensure_process's lock
        cluster.stop_process(processes.OPERATORS.name, timeout=0)


@dataclass(frozen=True)
class EsiApi:
    """Where the session's ``python -m api`` answers, and the token it accepts."""

    url: str
    extender_url: str
    token: str


def esi_api(cluster: LocalCluster) -> EsiApi:
    """Start ``python -m api`` for the cluster unless it runs (API and extender on ports of their own)."""
    directory = cluster.directory
    token_file = directory / "esi-api.token"

    def argv(port: int) -> list[str]:
        extender_port = free_port()
        (directory / "esi-api.extender-port").write_text(str(extender_port))
        return processes.api_command(
            sys.executable,
            kubeconfig=cluster.kubeconfig,
            port=port,
            extender_port=extender_port,
            token_file=token_file,
            log_format="text",
        )

    port = ensure_process(cluster, processes.API, argv)
    wait_for("the API's token", token_file.exists)
    extender_port = int((directory / "esi-api.extender-port").read_text())
    return EsiApi(
        f"http://127.0.0.1:{port}", processes.extender_url("127.0.0.1", extender_port), token_file.read_text().strip()
    )


@pytest.fixture(scope="session")
def esi_stack(
    esi_operators: LocalCluster,
    esi_sim: LocalCluster,  # noqa: F811 (the fixture imported above)
    sim_garbage_collected: LocalCluster,  # noqa: F811 (applications' pods go with them: GC follows the new kinds)
) -> LocalCluster:
    """The whole local esi: its reconcilers, the simulated Spark/Flink operator, the API (with the extender)
    and the second kube-scheduler ``esi-scheduler`` calling it — as ``make up`` runs them. One per session."""
    api = esi_api(esi_operators)
    settings = SecondSchedulerSettings(SCHEDULER_NAME, f"{api.extender_url}")
    with exclusive(esi_operators.directory / "esi-scheduler.lock"):
        scheduler = SecondScheduler(esi_operators, settings)
        if not scheduler.running():
            scheduler.start()
    return esi_operators


@pytest.fixture(scope="session")
def esi_crds(cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with esi's CRDs installed and established (as generated from the models now)."""
    install_esi_crds(cluster)
    return cluster


def install_esi_crds(cluster: LocalCluster) -> None:
    """esi's CRDs (as generated from the models now) applied to ``cluster``; returns once they are established."""
    crds = [crd(d) for d in DEFINITIONS]
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}),
    )
    cluster.wait_for_crds([c["metadata"]["name"] for c in crds])


AddNodes = Callable[..., list[str]]


@pytest.fixture
def add_nodes(cluster: LocalCluster, client: Client, unique: str) -> Iterator[AddNodes]:
    """Adds nodes only this test uses (label ``esi.test/pool=<unique>``); removes them afterwards."""
    added: list[str] = []

    def add(count: int, cpu: str = "2", memory: str = "4Gi", labels: dict[str, str] | None = None) -> list[str]:
        specs = [
            NodeSpec(f"n-{unique}-{i}", cpu=cpu, memory=memory, labels={"esi.test/pool": unique, **(labels or {})})
            for i in range(len(added), len(added) + count)
        ]
        cluster.add_nodes(specs)
        added.extend(s.name for s in specs)
        return [s.name for s in specs]

    yield add
    for name in added:
        client.delete(Node, name)


@pytest.fixture
def second_scheduler(cluster: LocalCluster, unique: str) -> Iterator[Callable[..., SecondScheduler]]:
    """``start(extender_url, **settings)``: a second kube-scheduler of this test's own name (further
    ``SecondSchedulerSettings`` as keywords); stopped afterwards."""
    started: list[SecondScheduler] = []

    def start(extender_url: str, **settings: Any) -> SecondScheduler:
        scheduler = SecondScheduler(cluster, SecondSchedulerSettings(f"esi-test-{unique}", extender_url, **settings))
        scheduler.start()
        started.append(scheduler)
        return scheduler

    yield start
    for scheduler in started:
        scheduler.stop()


@pytest.fixture
def priority_classes(client: Client, unique: str) -> Iterator[Callable[[Sequence[tuple[str, int]]], None]]:
    """Creates priority classes named <name>-<unique>; deletes them afterwards."""
    created: list[str] = []

    def create(classes: Sequence[tuple[str, int]]) -> None:
        for name, value in classes:
            client.create(priority_class(f"{name}-{unique}", value))
            created.append(f"{name}-{unique}")

    yield create
    for name in created:
        client.delete(PriorityClass, name)


@pytest.fixture
def fed_extender(esi_crds: LocalCluster) -> Iterator[tuple[str, SlotIndex]]:
    """esi's app on a free loopback port, its slot index following the cluster: (extender URL, the index)."""
    index = SlotIndex()
    app = create_extender_app(index, kube_config=KubeConfig.from_file(esi_crds.kubeconfig))
    # serve_in_thread raises if the app does not shut down (its index feed did not stop).
    with serve_in_thread(app, lifespan="on") as url:
        yield f"{url}/extender", index


@pytest.fixture(scope="session")
def esi_endpoint(esi_stack: LocalCluster) -> EsiApi:
    """The whole local esi (``esi_stack``) and where its API answers."""
    return esi_api(esi_stack)
