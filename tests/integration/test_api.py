"""The external scheduler API of ``python -m api`` against the real control plane and the real reconcilers.

Every route, as an external scheduler uses it: read Testbeds and BatchJobs, write profiling data, submit a
queue Scheduling, watch it complete, replace and delete it — plus the refusals (401, 404, 409, 422).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from esi.client import EsiClient, StompError
from esi.client.subscriber import subscribe
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes, EsiApi
from tests.integration.esi_objects import new_testbed_on_nodes, spark_job
from tests.integration.kube import create_in, create_testbed, get, status, wait_for
from tests.manifests import FLINK, batchjob_manifest, scheduling_manifest


@pytest.fixture
def api(esi_endpoint: EsiApi, namespace: str) -> Iterator[httpx.Client]:
    """A client of the session's API, working in the test's namespace."""
    headers = {"Authorization": f"Bearer {esi_endpoint.token}"}
    with httpx.Client(base_url=esi_endpoint.url, headers=headers, params={"namespace": namespace}, timeout=10) as c:
        yield c


def answered(api: httpx.Client, path: str, check: Callable[[Any], bool]) -> Callable[[], Any]:
    """Probe: the JSON of a 200 answer to ``path`` once ``check`` holds for it (the cache follows by watch)."""

    def probe() -> Any:
        answer = api.get(path)
        return answer.json() if answer.status_code == 200 and check(answer.json()) else None

    return probe


def test_a_scheduler_reads_submits_watches_and_deletes_through_the_api(
    esi_endpoint: EsiApi, esi_stack: LocalCluster, api: httpx.Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    for job in ("wordcount", "pagerank"):
        spark_job(esi_stack, namespace, job)

    testbed = wait_for(
        "the Testbed in the API", answered(api, "/external/testbeds/tb", lambda t: t["state"] == "SUCCESS")
    )
    assert (testbed["numberOfNodes"], testbed["numberOfSlotsPerNode"]) == (2, 2)
    assert sorted(s["position"] for node in testbed["slotsByNode"].values() for s in node) == [0, 1, 2, 3]
    assert [t["name"] for t in api.get("/external/testbeds").json()] == ["tb"]
    jobs = wait_for("both jobs in the API", answered(api, "/external/jobs", lambda j: len(j) == 2))
    assert jobs["wordcount"]["state"] == "ReadyState"

    # The profiler's notes: replaced wholesale, in the BatchJob's spec.
    notes = {"profiler": [{"pagerank": "41 (1)"}]}
    put = api.put("/external/jobs", json={"name": "wordcount", "externalScheduler": notes})
    assert (put.status_code, put.json()["externalScheduler"]) == (200, notes)
    assert get(esi_stack, namespace, "batchjob", "wordcount")["spec"]["externalScheduler"] == notes
    assert api.get("/external/jobs/wordcount").json()["externalScheduler"] == notes  # read your own write
    # Without externalScheduler nothing changes; with null it is removed (and the job sent back as read is fine).
    kept = api.put("/external/jobs", json={"name": "wordcount", "state": "ReadyState"})
    assert (kept.status_code, kept.json()["externalScheduler"]) == (200, notes)
    removed = api.put("/external/jobs", json={**api.get("/external/jobs/pagerank").json(), "externalScheduler": None})
    assert (removed.status_code, removed.json()["externalScheduler"]) == (200, None)

    created = api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["wordcount", "pagerank"]})
    assert created.status_code == 201, created.text
    assert created.json()["queue"] == ["wordcount", "pagerank"]
    assert get(esi_stack, namespace, "scheduling", "s")["spec"]["queueBased"] == [
        {"name": "wordcount"},
        {"name": "pagerank"},
    ]

    done = wait_for(
        "the Scheduling to complete",
        answered(api, "/external/schedulings/s", lambda s: s["state"] == "CompletedState"),
        timeout=120,
    )
    assert {j["name"]: j["state"] for j in done["jobStatus"]} == {"wordcount": "Completed", "pagerank": "Completed"}
    runs = wait_for(
        "the run in the job's history",
        answered(api, "/external/jobs/wordcount", lambda j: j["scheduledEvents"] and j["scheduledEvents"][-1]["stop"]),
    )["scheduledEvents"]
    assert runs[-1]["successful"] is True
    assert runs[-1]["scheduling"]["name"] == "s"
    overview = api.get("/external/overview").json()
    assert [(s["name"], s["state"]) for s in overview["schedulings"]] == [("s", "CompletedState")]

    replaced = api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["pagerank"]})
    assert replaced.status_code == 200, replaced.text
    assert get(esi_stack, namespace, "scheduling", "s")["spec"]["queueBased"] == [{"name": "pagerank"}]

    deleted = api.delete("/external/schedulings/s")
    assert (deleted.status_code, deleted.json()["name"]) == (200, "s")
    wait_for("the Scheduling to be gone", lambda: api.delete("/external/schedulings/s").status_code == 404)
    wait_for("the API to forget it", lambda: api.get("/external/schedulings/s").status_code == 404)


def test_refusals_name_what_is_wrong_and_change_nothing(
    esi_endpoint: EsiApi, esi_stack: LocalCluster, api: httpx.Client, namespace: str
) -> None:
    assert httpx.get(f"{esi_endpoint.url}/external/testbeds").status_code == 401
    wrong = httpx.get(f"{esi_endpoint.url}/external/testbeds", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401

    missing_job = api.put("/external/jobs", json={"name": "nope", "externalScheduler": {}})
    assert missing_job.status_code == 404
    assert "BatchJob nope" in missing_job.json()["detail"]["message"]
    assert api.delete("/external/schedulings/nope").status_code == 404  # the original answered 304

    missing = api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["a", "b", "a"]})
    assert missing.status_code == 422, missing.text
    assert missing.json()["detail"]["message"] == (
        f"Scheduling s names BatchJobs that do not exist in namespace {namespace}: a, b"
    )
    assert [p["field"] for p in missing.json()["detail"]["errors"]] == ["queue[0]", "queue[1]", "queue[2]"]
    invalid = api.post("/external/schedulings", json={"name": "Not A Name", "testBed": "../tb", "queue": ["a"]})
    assert invalid.status_code == 422, invalid.text
    assert [p["field"] for p in invalid.json()["detail"]["errors"]] == ["name", "testBed"]
    assert api.get("/external/schedulings").json() == []
    # A job created a moment ago, which the API's cache may not have seen yet, is there (read in one LIST).
    spark_job(esi_stack, namespace, "a")
    assert api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["a"]}).status_code == 201


def test_a_job_that_can_never_run_in_the_testbeds_slots_is_refused_at_submission_and_fails_an_applied_scheduling(
    esi_stack: LocalCluster, api: httpx.Client, namespace: str, unique: str
) -> None:
    create_testbed(esi_stack, namespace, f"esi.test/{unique}")  # slots of 1Gi; no node needed to judge the job
    # The job's own managed memory leaves its TaskManager no heap in any slot.
    greedy = FLINK | {"flinkConfiguration": {"taskmanager.memory.managed.fraction": "0.9"}}
    create_in(esi_stack, namespace, batchjob_manifest(sparkSpec=None, flinkSpec=greedy) | {"metadata": {"name": "wc"}})
    wait_for("the Testbed and the job in the API", lambda: all(
        api.get(path).status_code == 200 for path in ("/external/testbeds/tb", "/external/jobs/wc")
    ))  # fmt: skip

    refused = api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["wc", "wc"]})

    assert refused.status_code == 422, refused.text
    (problem,) = refused.json()["detail"]["errors"]
    assert problem["field"] == "queue[0]"
    assert problem["problem"].startswith("job wc can never run in testbed tb's slots: ")
    assert (
        'lower or leave out spec.flinkSpec.flinkConfiguration["taskmanager.memory.managed.fraction"]'
        in (problem["problem"])
    )
    assert api.get("/external/schedulings").json() == []
    # Applied with kubectl it is written, and its reconciler fails it before any attempt, saying why.
    create_in(esi_stack, namespace, scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": "wc"}]))
    failed = wait_for(
        "the Scheduling Failed", lambda: (s := status(esi_stack, namespace, "scheduling", "sched")).get("state")
        == "Failed" and s
    )  # fmt: skip
    placeable = next(c for c in failed["conditions"] if c["type"] == "Placeable")
    assert (placeable["status"], placeable["reason"]) == ("False", "Unplaceable")
    assert placeable["message"].startswith("job wc can never run in testbed tb's slots: ")
    assert status(esi_stack, namespace, "batchjob", "wc").get("state") in (None, "Ready"), "no run was started"


def test_a_scheduling_being_deleted_cannot_be_replaced(
    esi_stack: LocalCluster, api: httpx.Client, namespace: str
) -> None:
    for job in ("a", "b"):
        spark_job(esi_stack, namespace, job)
    assert api.post("/external/schedulings", json={"name": "s", "testBed": "none", "queue": ["a"]}).status_code == 201
    wait_for("esi's finalizer", lambda: get(esi_stack, namespace, "scheduling", "s")["metadata"].get("finalizers"))
    # Held in deletion by a finalizer of the test's own, as long as it likes.
    esi_stack.kubectl(
        "patch", "scheduling", "s", "-n", namespace, "--type=json",
        "-p", '[{"op": "add", "path": "/metadata/finalizers/-", "value": "esi.test/hold"}]',
    )  # fmt: skip
    assert api.delete("/external/schedulings/s").status_code == 200

    again = api.post("/external/schedulings", json={"name": "s", "testBed": "none", "queue": ["b"]})

    assert again.status_code == 409
    assert "being deleted" in again.json()["detail"]["message"]
    esi_stack.kubectl(
        "patch", "scheduling", "s", "-n", namespace, "--type=merge", "-p", '{"metadata": {"finalizers": null}}'
    )


def next_event(events: Any, what: str, timeout: float = 30) -> Any:
    event = events.next(timeout)
    assert event is not None, f"no STOMP message for {what} within {timeout:.0f}s"
    return event


def test_a_stomp_subscriber_hears_a_create_a_modify_and_a_delete(
    esi_endpoint: EsiApi, esi_stack: LocalCluster, namespace: str
) -> None:
    for job in ("a", "b"):
        spark_job(esi_stack, namespace, job)
    esi = EsiClient(esi_endpoint.url, token=esi_endpoint.token, namespace=namespace)
    with esi, esi.watch("schedulings") as names, esi.watch("schedulings", "s") as views:
        assert esi.submit_queue("s", "no-such-testbed", ["a"]).created
        added = next_event(views, "the create")
        assert (added.action, added.resource.queue) == ("ADDED", ["a"])
        listed = next_event(names, "the create")
        assert (listed.action, listed.name, listed.resource) == ("ADDED", "s", None)

        assert not esi.submit_queue("s", "no-such-testbed", ["b"]).created
        modified = next_event(views, "the modification")
        while modified.resource.queue != ["b"]:  # status writes of the reconciler may come first
            modified = next_event(views, "the modification")
        assert modified.action == "MODIFIED"

        esi.delete_scheduling("s")
        while (event := next_event(views, "the deletion")).action != "DELETED":
            pass
        assert event.resource.name == "s"


def test_stomp_refuses_a_wrong_token_with_the_reason(esi_endpoint: EsiApi) -> None:
    wrong = "not-the-token"
    with (
        pytest.raises(StompError, match="unauthenticated"),
        subscribe(esi_endpoint.url, ["/topic/testbeds"], token=wrong),
    ):
        pass
