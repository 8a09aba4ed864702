"""A scheduler written for the original ESI, as strict as the original's own client, through a profiler round.

The original's example scheduler had no token to send, sent every field of the objects it held (nulls
included) and read STOMP messages with a plain Jackson ``ObjectMapper``: a field its classes do not declare,
or a state name its enums do not have, fails the message, and a scheduler that never reads "completed" waits
for ever. ``OriginalClient`` behaves so: no ``Authorization`` header, no ``view``, every answer and message
parsed into models that forbid unknown fields and know only the original's state names (declared here from
the original's public classes: field names and enum values, nothing else).

The API runs as in a cluster (``KubernetesAuth``): the caller is ``system:anonymous`` and RBAC decides, after
an administrator bound a Role to it in the test's namespace. The round is the profiler's: wait for the
Testbed, read the jobs, POST a queue of two, wait on STOMP for ``CompletedState``, PUT each job's matrix row
(the whole job sent back, as read), DELETE the Scheduling (docs/compatibility.md#views).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from pydantic import BaseModel, ConfigDict, TypeAdapter

from api.app import create_api_app
from api.auth import ANONYMOUS, KubernetesAuth
from api.threaded import serve_in_thread
from esi.client.subscriber import subscribe
from esi.resources.meta import GROUP
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes
from tests.integration.kube import create_in, create_testbed, wait_for
from tests.manifests import SPARK, batchjob_manifest

ROUND_TIMEOUT = 120
ESI_RESOURCES = ("testbeds", "batchjobs", "schedulings")


class Strict(BaseModel):
    """Jackson's plain ObjectMapper: an unknown field is an error. Fields are named as the original's are."""

    model_config = ConfigDict(extra="forbid")


class NamespacedName(Strict):
    namespace: str | None
    name: str | None


class SlotOccupationStatus(Strict):
    reservedFor: str | None
    state: Literal["FREE", "RESERVED", "OCCUPIED", "ERROR"] | None
    podName: str | None
    nodeName: str | None
    nodeId: int | None
    slotPositionOnNode: int | None
    podUId: str | None
    position: int | None


class ExternalTestbed(Strict):
    name: str | None
    state: Literal["IN_PROGRESS", "SUCCESS", "ERROR", "RUNNING", "INITIAL"] | None
    numberOfNodes: int | None
    numberOfSlotsPerNode: int | None
    slotsByNode: dict[str, list[SlotOccupationStatus]] | None


class ScheduledEvents(Strict):
    start: str | None
    stop: str | None
    successful: bool | None
    scheduling: NamespacedName | None


BatchJobState = Literal[
    "ReadyState", "PendingDeletion", "InQueueState", "SubmittedState", "ScheduledState", "RunningState",
    "CompletedState", "FailedState", "FailedSubmissionState", "UnknownState",
]  # fmt: skip


class ExternalBatchJob(Strict):
    name: str | None
    state: BatchJobState | None
    externalScheduler: dict[str, list[dict[str, str]]] | None
    scheduledEvents: list[ScheduledEvents] | None


class JobStatus(Strict):
    name: str | None
    state: Literal["Acquiring", "InQueue", "Submitted", "Scheduled", "Completed"] | None


class SlotsItem(Strict):
    slots: list[int] | None
    name: str | None


class SlotScheduling(Strict):
    mode: str | None
    jobs: list[SlotsItem] | None


SchedulingState = Literal[
    "FailedState", "InitialState", "AcquireState", "CompletedState", "ConfirmationState", "FinishedState",
    "SubmissionState", "AwaitingCompletionState", "Error",
]  # fmt: skip


class ExternalScheduling(Strict):
    name: str | None
    state: SchedulingState | None
    jobStatus: list[JobStatus] | None
    testBed: str | None
    queue: list[str] | None
    slots: SlotScheduling | None


class Modification(Strict):
    action: Literal["ADDED", "MODIFIED", "DELETED", "ERROR", "BOOKMARK"]
    resource: Any


class OriginalClient:
    """The original's client: REST without a token, STOMP without a view, everything read strictly."""

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        # The original served one namespace; here the test's, chosen the one way esi offers.
        self.http = httpx.Client(base_url=url, params={"namespace": namespace}, timeout=10)
        self.namespace = namespace

    def close(self) -> None:
        self.http.close()

    def read(self, method: str, path: str, shape: Any, body: Any = None) -> Any:
        answer = self.http.request(method, path, json=body)
        assert answer.is_success, f"{method} {path}: {answer.status_code} {answer.text}"
        assert "authorization" not in answer.request.headers
        return TypeAdapter(shape).validate_json(answer.content)

    def wait_on(self, topic: str, shape: type[Strict], done: Any, initial: Any) -> Any:
        """Subscribe to ``topic``, then read the object once (``initial``); every message parsed strictly."""
        with subscribe(self.url, [topic], namespace=self.namespace) as messages:
            first = initial()
            if done(first):
                return first
            deadline = time.monotonic() + ROUND_TIMEOUT
            while (message := messages.next(timeout=max(deadline - time.monotonic(), 0.1))) is not None:
                modification = Modification.model_validate(message.json())
                assert modification.action != "DELETED", f"{topic}: deleted while waited on"
                resource = shape.model_validate(modification.resource)
                if done(resource):
                    return resource
                assert time.monotonic() < deadline, f"{topic}: not done in {ROUND_TIMEOUT} s"
        raise AssertionError(f"{topic}: the subscription ended")


@pytest.fixture
def anonymous_may_schedule(client: Client, namespace: str) -> None:
    """What an administrator grants a scheduler that sends no token: read everything, submit Schedulings."""
    rules = [
        PolicyRule(
            apiGroups=[GROUP], resources=["testbeds", "batchjobs", "schedulings"], verbs=["get", "list", "watch"]
        ),
        PolicyRule(apiGroups=[GROUP], resources=["schedulings"], verbs=["create", "update", "delete"]),
        PolicyRule(apiGroups=[GROUP], resources=["batchjobs"], verbs=["patch"]),
    ]
    client.create(Role(metadata=ObjectMeta(name="original-scheduler"), rules=rules), namespace=namespace)
    binding = RoleBinding(
        metadata=ObjectMeta(name="original-scheduler"),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name="original-scheduler"),
        subjects=[Subject(kind="User", name=ANONYMOUS.name, apiGroup="rbac.authorization.k8s.io")],
    )
    client.create(binding, namespace=namespace)


@pytest.fixture
def api_in_cluster_mode(esi_stack: LocalCluster, anonymous_may_schedule: None) -> Iterator[str]:
    """esi's API as a cluster runs it: Kubernetes authenticates and RBAC authorizes."""
    config = KubeConfig.from_file(esi_stack.kubeconfig)
    reviews = AsyncClient(config=config)
    app = create_api_app(KubernetesAuth(reviews, cache_seconds=0), kube_config=config, closing=[reviews.close])
    with serve_in_thread(app, lifespan="on") as url:
        wait_for("the API's caches", lambda: httpx.get(f"{url}/readyz").status_code == 200, timeout=30)
        yield url


def test_the_originals_profiler_round_runs_unchanged(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, api_in_cluster_mode: str
) -> None:
    label = f"esi.test/original-{unique}"
    add_nodes(1, cpu="2", labels={label: "0"})
    create_testbed(esi_stack, namespace, label)
    for job in ("a", "b"):
        create_in(esi_stack, namespace, batchjob_manifest(sparkSpec=dict(SPARK)) | {"metadata": {"name": job}})
    with contextlib.closing(OriginalClient(api_in_cluster_mode, namespace)) as original:
        profiler_round(original)


def profiler_round(original: OriginalClient) -> None:
    """What the original's example scheduler does for one pair (its profiler loop, once)."""
    # 1. wait for the Testbed
    testbed = original.wait_on(
        "/topic/testbeds/tb",
        ExternalTestbed,
        lambda t: t.state == "SUCCESS",
        lambda: original.read("GET", "/external/testbeds/tb", ExternalTestbed),
    )
    assert (testbed.numberOfNodes, testbed.numberOfSlotsPerNode) == (1, 2)

    # 2. the jobs, by name
    jobs = original.read("GET", "/external/jobs", dict[str, ExternalBatchJob])
    assert set(jobs) == {"a", "b"}

    # 3. a queue of the pair, posted with every field of the object, nulls included
    request = {"name": "profiler-scheduling-0", "state": None, "jobStatus": None, "testBed": "tb",
               "queue": ["a", "b"], "slots": None}  # fmt: skip
    created = original.read("POST", "/external/schedulings", ExternalScheduling, request)
    assert (created.name, created.testBed, created.queue) == ("profiler-scheduling-0", "tb", ["a", "b"])

    # 4. wait on STOMP for its completion
    topic = "/topic/schedulings/profiler-scheduling-0"
    done = original.wait_on(
        topic,
        ExternalScheduling,
        lambda s: s.state == "CompletedState",
        lambda: original.read("GET", "/external/schedulings/profiler-scheduling-0", ExternalScheduling),
    )
    assert {(j.name, j.state) for j in done.jobStatus or []} == {("a", "Completed"), ("b", "Completed")}

    # 5. each job's runtime beside the other, into its matrix row, the whole job sent back as read
    jobs = original.read("GET", "/external/jobs", dict[str, ExternalBatchJob])
    for name, partner in (("a", "b"), ("b", "a")):
        job = jobs[name]
        last = (job.scheduledEvents or [])[-1]
        assert last.successful is True
        assert last.scheduling is not None
        assert last.scheduling.name == "profiler-scheduling-0"
        row = {partner: "12 (1)"}
        sent = job.model_dump() | {"externalScheduler": {"profiler": [row]}}
        updated = original.read("PUT", "/external/jobs/", ExternalBatchJob, sent)
        assert updated.externalScheduler == {"profiler": [row]}

    # 6. delete the Scheduling: the answer is it as it was
    deleted = original.read("DELETE", "/external/schedulings/profiler-scheduling-0", ExternalScheduling)
    assert deleted.state == "CompletedState"
    again = original.read("GET", "/external/jobs", dict[str, ExternalBatchJob])
    assert {n: j.externalScheduler for n, j in again.items()} == {
        "a": {"profiler": [{"b": "12 (1)"}]},
        "b": {"profiler": [{"a": "12 (1)"}]},
    }
