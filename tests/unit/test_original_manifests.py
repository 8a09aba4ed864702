"""Manifests written for the original ESI are read as what esi runs: a Scheduling's ``slots`` as its Testbed, a
Flink job in the FlinkCluster job shape as a FlinkDeployment (docs/compatibility.md#manifests)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from esi.decisions.scheduling_lifecycle import SchedulingObservation, decide_scheduling
from esi.objects.applications import SlotAssignment, application_manifest
from esi.resources.batchjob import BatchJob
from esi.resources.flink_cluster import flink_jar_uri
from esi.resources.quantity import Quantity
from esi.resources.scheduling import SchedulingSpec, testbed_field, testbed_name
from sim.pods import flink_jobmanager_deployment
from tests.manifests import ORIGINAL_FLINK, batchjob_manifest, read
from tests.original_manifests import ORIGINAL, Original


def flink_spec(**original: Any) -> dict[str, Any]:
    """The FlinkDeployment spec esi reads from an original-shape flinkSpec (``ORIGINAL_FLINK`` and ``original``)."""
    job = BatchJob.model_validate(batchjob_manifest(sparkSpec=None, flinkSpec=ORIGINAL_FLINK | original))
    assert job.spec.flink_spec is not None
    return job.spec.flink_spec.to_json_dict()


@pytest.mark.parametrize("case", ORIGINAL.values(), ids=ORIGINAL.keys())
def test_an_original_manifest_is_read_as_what_esi_runs(case: Original) -> None:
    spec = read(case.manifest).model_dump(mode="json", exclude_none=True)["spec"]

    expected = {key: value for key, value in case.manifest["spec"].items() if key != "slots"} | case.reads_as
    assert {key: spec.get(key) for key in expected} == expected
    assert "slots" not in spec, "the original's name of testbed is read as testbed"


@pytest.mark.parametrize("case", ORIGINAL.values(), ids=ORIGINAL.keys())
def test_what_esi_reads_reads_the_same_again(case: Original) -> None:
    model = read(case.manifest)

    assert read(model.model_dump(mode="json", exclude_none=True)) == model


@pytest.mark.parametrize(
    ("jar_file", "jar_uri"),
    [
        ("./examples/streaming/WordCount.jar", "local:///opt/flink/examples/streaming/WordCount.jar"),
        ("examples/batch/WordCount.jar", "local:///opt/flink/examples/batch/WordCount.jar"),
        ("../usrlib/job.jar", "local:///opt/usrlib/job.jar"),
        ("/opt/flink/usrlib/job.jar", "local:///opt/flink/usrlib/job.jar"),
        ("local:///opt/flink/usrlib/job.jar", "local:///opt/flink/usrlib/job.jar"),
        ("https://repo.example.org/jobs/job.jar", "https://repo.example.org/jobs/job.jar"),
        ("gs://bucket/job.jar", "gs://bucket/job.jar"),
    ],
    ids=["relative", "relative-bare", "relative-up", "absolute", "local-uri", "https", "gs"],
)
def test_a_jar_path_is_a_local_uri_in_flinks_home_and_a_uri_stays(jar_file: str, jar_uri: str) -> None:
    assert flink_jar_uri(jar_file) == jar_uri
    assert flink_spec(jarFile=jar_file)["job"]["jarURI"] == jar_uri


def test_the_job_submitters_pod_settings_go_to_the_jobmanager_which_runs_the_job() -> None:
    volume = {"name": "jars", "emptyDir": {}}
    mount = {"name": "jars", "mountPath": "/opt/flink/usrlib"}
    fetch = {"name": "fetch", "image": "busybox", "command": ["wget", "-O", "/opt/flink/usrlib/job.jar", "…"]}
    toleration = {"key": "batch", "operator": "Exists"}

    spec = flink_spec(
        volumes=[volume],
        volumeMounts=[mount],
        initContainers=[fetch],
        nodeSelector={"disk": "ssd"},
        tolerations=[toleration],
        securityContext={"runAsUser": 9999},
        podLabels={"team": "a"},
        podAnnotations={"note": "x"},
        restartPolicy="Never",
    )

    assert spec["jobManager"]["podTemplate"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {
            "volumes": [volume],
            "initContainers": [fetch],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [toleration],
            "securityContext": {"runAsUser": 9999},
            "containers": [{"name": "flink-main-container", "volumeMounts": [mount]}],
        },
    }
    assert "taskManager" not in spec, "the job's pod settings were the submitter's, never the TaskManagers'"
    assert "restartPolicy" not in spec["job"], "Never is what esi does: a failed run is retried as a new one"


def test_the_job_and_its_savepoint_settings_carry_over() -> None:
    spec = flink_spec(
        args=["--output", "/tmp/out"],  # noqa: S108 (an argument of the job, never opened here)
        parallelism=4,
        fromSavepoint="s3://savepoints/sp-1",
        allowNonRestoredState=True,
        savepointsDir="s3://savepoints",
    )

    assert spec["job"] == {
        "jarURI": "local:///opt/flink/examples/batch/WordCount.jar",
        "entryClass": "WordCount",
        "args": ["--output", "/tmp/out"],  # noqa: S108
        "parallelism": 4,
        "initialSavepointPath": "s3://savepoints/sp-1",
        "allowNonRestoredState": True,
        "upgradeMode": "stateless",
    }
    assert spec["flinkConfiguration"] == {"state.savepoints.dir": "s3://savepoints"}


def test_flinkdeployment_fields_beside_the_original_shape_are_kept() -> None:
    spec = flink_spec(
        image="registry.example.org/flink-jobs:1.19",
        flinkVersion="v1_19",
        flinkConfiguration={"taskmanager.numberOfTaskSlots": "2"},
        savepointsDir="s3://savepoints",
        jobManager={"resource": {"cpu": 0.5, "memory": "2048m"}},
        volumes=[{"name": "v", "emptyDir": {}}],
    )

    assert (spec["image"], spec["flinkVersion"], spec["serviceAccount"]) == (
        "registry.example.org/flink-jobs:1.19",
        "v1_19",
        "flink",
    )
    assert spec["flinkConfiguration"] == {
        "taskmanager.numberOfTaskSlots": "2",
        "state.savepoints.dir": "s3://savepoints",
    }
    assert spec["jobManager"]["resource"] == {"cpu": 0.5, "memory": "2048m"}
    assert spec["jobManager"]["podTemplate"]["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


def test_an_original_flink_job_runs_as_a_flinkdeployment_the_simulator_runs() -> None:
    volume, mount = {"name": "jars", "emptyDir": {}}, {"name": "jars", "mountPath": "/opt/flink/usrlib"}
    original = ORIGINAL_FLINK | {"volumes": [volume], "volumeMounts": [mount]}
    job = BatchJob.model_validate(batchjob_manifest(sparkSpec=None, flinkSpec=original))
    slots = SlotAssignment("tb", "slots", ("0", "1"), ("node-0", "node-1"), (0, 1), Quantity("1"), Quantity("1Gi"))

    app = application_manifest(job, slots, namespace="ns", uid="uid-of-the-batchjob")
    deployment = flink_jobmanager_deployment(app | {"metadata": app["metadata"] | {"uid": "uid-of-the-deployment"}})
    pod = deployment["spec"]["template"]

    assert (app["kind"], app["spec"]["job"]["jarURI"]) == (
        "FlinkDeployment",
        "local:///opt/flink/examples/batch/WordCount.jar",
    )
    assert (app["spec"]["taskManager"]["replicas"], app["spec"]["job"]["parallelism"]) == (2, 2)
    assert pod["spec"]["volumes"] == [volume]
    (container,) = pod["spec"]["containers"]
    assert (container["image"], container["volumeMounts"]) == ("flink:1.20", [mount])


@pytest.mark.parametrize(
    ("spec", "field", "name"),
    [
        ({"testbed": {"name": "tb"}}, "testbed", "tb"),
        ({"slots": {"name": "batchjob-slots", "namespace": "default"}}, "slots", "batchjob-slots"),
        ({"testbed": {"name": "tb"}, "slots": {"name": "other"}}, "testbed", "tb"),
        ({}, "testbed", ""),
        ({"testbed": "tb"}, "testbed", ""),
    ],
    ids=["testbed", "original-slots", "both", "neither", "not-a-reference"],
)
def test_a_raw_scheduling_spec_names_its_testbed_in_either_field(spec: dict[str, Any], field: str, name: str) -> None:
    assert (testbed_field(spec), testbed_name(spec)) == (field, name)


@pytest.mark.parametrize("field", ["testbed", "slots"])
def test_a_schedulings_status_names_its_testbed_whichever_field_the_spec_used(field: str) -> None:
    spec = SchedulingSpec.model_validate({field: {"name": "batchjob-slots"}, "queueBased": [{"name": "a"}]})

    decision = decide_scheduling(
        spec,
        None,
        SchedulingObservation(testbed=None, jobs={}),
        name="s",
        namespace="ns",
        generation=1,
        now=datetime(2026, 1, 1, tzinfo=UTC),
    )

    assert decision.status.testbed == "batchjob-slots"
