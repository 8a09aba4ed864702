"""Every run kept: each finished run of a BatchJob becomes a Run object once its Scheduling lets the job go,
labelled for selection and the same as the job's history; a Run lost to a crash between the job's status write
and its creation comes back; a BatchJob deleted while its run runs, or before its ended run was kept, keeps it
first; retention keeps each namespace's newest Runs."""

from __future__ import annotations

import asyncio
import functools
import json
from datetime import timedelta
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig

from esi.decisions.batchjob_lifecycle import DELETED_WHILE_RUNNING
from esi.objects.names import JOB_LABEL
from esi.objects.runs import Retention, run_name
from esi.resources.meta import utc_now
from infra.local_cluster import ClusterError, LocalCluster
from operators.runs import prune_runs
from sim.names import ENDS_AT_ANNOTATION, STARTED_AT_ANNOTATION
from tests.integration.conftest import AddNodes, ensure_operators, kill_operators
from tests.integration.esi_objects import new_testbed_on_nodes, run_to_end, spark_job
from tests.integration.kube import create_in, get, status, wait_for
from tests.manifests import scheduling_manifest

COMPLETION = 300  # seconds a Scheduling of one simulated job may take on a busy 2-core machine


def runs_of(cluster: LocalCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    """The job's Runs, as ``kubectl get runs -l`` lists them, by ordinal."""
    listed = json.loads(cluster.kubectl("get", "runs", "-n", namespace, "-l", f"{JOB_LABEL}={job}", "-o", "json"))
    return sorted(listed["items"], key=lambda r: r["spec"]["ordinal"])


def counted(runs: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    return runs if len(runs) == count else None


def counted_runs(cluster: LocalCluster, namespace: str, job: str, count: int) -> list[dict[str, Any]] | None:
    return counted(runs_of(cluster, namespace, job), count)


def run_once(cluster: LocalCluster, namespace: str, name: str, job: str) -> None:
    """Scheduling ``name`` runs ``job`` to its end, then is deleted: the job is let go."""
    run_to_end(cluster, namespace, name, {"queueBased": [{"name": job}]}, timeout=COMPLETION)


def test_each_finished_run_becomes_a_run_once_its_job_is_let_go(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "wordcount")
    spark_job(esi_stack, namespace, "other")
    for name in ("first", "second"):
        run_once(esi_stack, namespace, name, "wordcount")
    run_once(esi_stack, namespace, "third", "other")

    runs = wait_for("two Runs of wordcount", functools.partial(counted_runs, esi_stack, namespace, "wordcount", 2))
    job = get(esi_stack, namespace, "batchjob", "wordcount")
    uid = job["metadata"]["uid"]
    assert [r["metadata"]["name"] for r in runs] == [run_name("wordcount", uid, 1), run_name("wordcount", uid, 2)]
    history = job["status"]["runs"]
    for run, record in zip(runs, history, strict=True):
        spec = run["spec"]
        assert {k: spec[k] for k in record} == record, "the Run holds what the history holds"
        assert (spec["job"], spec["jobUid"], spec["kind"]) == ("wordcount", uid, "spark")
        assert run["metadata"]["labels"][f"{JOB_LABEL}"] == "wordcount"
        assert run["metadata"]["labels"]["esi.tu-berlin.de/scheduling"] == record["scheduling"]
        assert run["metadata"]["labels"]["esi.tu-berlin.de/testbed"] == "tb"
        assert "ownerReferences" not in run["metadata"], "it outlives its job"
    assert [r["spec"]["scheduling"] for r in runs] == ["first", "second"]
    assert job["status"]["keptRuns"] == 2
    table = esi_stack.kubectl("get", "runs", "-n", namespace, "-l", "esi.tu-berlin.de/scheduling=first")
    assert table.split()[:8] == ["NAME", "JOB", "SCHEDULING", "TESTBED", "OUTCOME", "STARTED", "RUNTIME", "AGE"]
    assert "Succeeded" in table

    with pytest.raises(ClusterError, match="a run's record is never changed"):
        esi_stack.kubectl(
            "patch", "run", runs[0]["metadata"]["name"], "-n", namespace, "--type=merge", "-p",
            json.dumps({"spec": {"outcome": "Failed"}}),
        )  # fmt: skip


def test_a_run_lost_between_the_status_write_and_its_creation_comes_back(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "wordcount")
    run_once(esi_stack, namespace, "first", "wordcount")
    (kept,) = wait_for("its Run", lambda: runs_of(esi_stack, namespace, "wordcount") or None)

    # What a crash right after the job's status write leaves: the run final in the history, no Run, none counted.
    kill_operators(esi_stack)
    try:
        esi_stack.kubectl("delete", "run", kept["metadata"]["name"], "-n", namespace)
        esi_stack.kubectl(
            "patch", "batchjob", "wordcount", "-n", namespace, "--subresource=status", "--type=json", "-p",
            json.dumps([{"op": "replace", "path": "/status/keptRuns", "value": 0}]),
        )  # fmt: skip
    finally:
        ensure_operators(esi_stack)

    (back,) = wait_for("the Run back", lambda: runs_of(esi_stack, namespace, "wordcount") or None, timeout=60)
    assert back["spec"] == kept["spec"]
    assert back["metadata"]["name"] == kept["metadata"]["name"]
    assert status(esi_stack, namespace, "batchjob", "wordcount")["keptRuns"] == 1


def test_a_job_deleted_while_its_run_runs_or_before_its_ended_run_is_kept_keeps_it_first(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "ended")
    spark_job(esi_stack, namespace, "running")
    manifest = scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": j} for j in ("ended", "running") * 2])
    create_in(esi_stack, namespace, manifest | {"metadata": {"name": "s"}})
    wait_for("running's application", lambda: get(esi_stack, namespace, "sparkapplication", "running") or None)
    started = utc_now()  # the simulated run is planned to last an hour, whether it started already or not
    plan = {STARTED_AT_ANNOTATION: started, ENDS_AT_ANNOTATION: started + timedelta(hours=1)}
    annotations = [f"{key}={when.isoformat()}" for key, when in plan.items()]
    esi_stack.kubectl("annotate", "-n", namespace, "sparkapplication", "running", "--overwrite", *annotations)
    wait_for(
        "ended Succeeded, running Running",
        lambda: (
            status(esi_stack, namespace, "batchjob", "ended").get("state") == "Succeeded"
            and status(esi_stack, namespace, "batchjob", "running").get("state") == "Running"
        ),
        timeout=COMPLETION,
    )
    ended = get(esi_stack, namespace, "batchjob", "ended")
    assert ended["status"].get("keptRuns", 0) == 0, "held by its Scheduling: not kept yet"

    esi_stack.kubectl("delete", "-n", namespace, "batchjob", "ended", "running", "--wait=true", "--timeout=60s")

    (kept,) = runs_of(esi_stack, namespace, "ended")
    (record,) = ended["status"]["runs"]
    assert {k: kept["spec"][k] for k in record} == record, "the Run holds what the history held"
    assert kept["spec"]["outcome"] == "Succeeded"
    (cancelled,) = runs_of(esi_stack, namespace, "running")
    assert (cancelled["spec"]["outcome"], cancelled["spec"]["reason"]) == ("Cancelled", DELETED_WHILE_RUNNING)
    assert cancelled["spec"]["end"] is not None


def test_retention_keeps_the_newest_runs_of_a_namespace(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "wordcount")
    for count, name in enumerate(("first", "second", "third"), start=1):
        run_once(esi_stack, namespace, name, "wordcount")
        wait_for(f"the Run of {name}", functools.partial(counted_runs, esi_stack, namespace, "wordcount", count))

    async def prune() -> int:
        client = AsyncClient(config=KubeConfig.from_file(esi_stack.kubeconfig))
        try:
            return await prune_runs(client, Retention(keep=2), now=utc_now(), namespace=namespace)
        finally:
            await client.close()

    assert asyncio.run(prune()) == 1
    assert [r["spec"]["scheduling"] for r in runs_of(esi_stack, namespace, "wordcount")] == ["second", "third"]
    assert len(status(esi_stack, namespace, "batchjob", "wordcount")["runs"]) == 3, "the job keeps its history"
