"""The simulated operators' decisions: status transitions, the run's plan, failures — on a small stand-in cluster."""

from __future__ import annotations

import copy
import json
import statistics
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from esi.objects.applications import slot_node_affinity
from esi.objects.names import ATTEMPT_ANNOTATION
from sim.lifecycle import (
    Annotate,
    CreateDeployment,
    CreatePod,
    Decision,
    DeletePod,
    EndPod,
    Observation,
    RunPlan,
    SimSettings,
    WriteStatus,
    decide,
    rejected,
)
from sim.names import (
    COLOCATED_ANNOTATION,
    ENDS_AT_ANNOTATION,
    EXECUTORS_AT_ANNOTATION,
    FAILURE_ANNOTATION,
    SEEN_AT_ANNOTATION,
    TASKMANAGERS_ANNOTATION,
)
from sim.pods import DeploymentView, NodeExecutor, PodRole, PodView, executor_placement, node_executor, pod_view
from sim.runtime import InterferenceModel
from tests.unit.operator_objects import esi_executor, flink_app, replica_pod, spark_app

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MILLIS = str(int(NOW.timestamp() * 1000))
TABLE = "job,colocated_with,mean_runtime_s,samples\nbatchjob-spark,batchjob-flink,70,4\n"
SETTINGS = SimSettings(InterferenceModel.from_csv(TABLE, bases={"batchjob-spark": 50}, time_scale=0.1))


class World:
    """A stand-in for the cluster: applies decisions as the API server would, makes a Deployment's pod as its
    ReplicaSet would, binds and runs pods as the kube-scheduler and KWOK would, and lets time pass."""

    def __init__(self, app: dict[str, Any], settings: SimSettings = SETTINGS) -> None:
        self.app = copy.deepcopy(app)
        self.settings = settings
        self.pods: dict[str, PodView] = {}
        self.deployments: dict[str, DeploymentView] = {}
        self.over: set[str] = set()  # uids of other applications whose run is over
        self.others: dict[str, list[NodeExecutor]] = {}  # other applications' executors, by node
        self.placements: dict[str, list[NodeExecutor]] = {}  # other applications' executors to be, by node
        self.now = NOW

    @property
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.app.get("status") or {}
        return status

    @property
    def annotations(self) -> dict[str, str]:
        annotations: dict[str, str] = self.app["metadata"]["annotations"]
        return annotations

    def observation(self) -> Observation:
        nodes: dict[str, list[NodeExecutor]] = {node: list(found) for node, found in self.others.items()}
        for pod in self.pods.values():
            held = node_executor(pod)
            if held is not None:
                nodes.setdefault(held[0], []).append(held[1])
        deployments = list(self.deployments.values())
        return Observation(
            self.app,
            list(self.pods.values()),
            nodes,
            self.now,
            deployments=deployments,
            over=self.over.__contains__,
            node_placements=self.placements,
        )

    def decide(self) -> Decision:
        return decide(self.observation(), self.settings)

    def apply(self, decision: Decision) -> Decision:
        for action in decision.actions:
            if isinstance(action, CreatePod):
                self._create_pod(action.manifest)
            elif isinstance(action, CreateDeployment):
                name = action.manifest["metadata"]["name"]
                if name not in self.deployments:
                    self.deployments[name] = DeploymentView(name, f"uid-{name}", self.app["metadata"]["uid"])
                    self._create_pod(replica_pod(action.manifest))
            elif isinstance(action, DeletePod):
                del self.pods[action.name]
            elif isinstance(action, EndPod):
                self.pods[action.pod.name] = _with(action.pod, phase="Succeeded" if action.succeeded else "Failed")
            elif isinstance(action, Annotate):
                self.annotations.update(action.annotations)
            elif isinstance(action, WriteStatus):
                self.app["status"] = copy.deepcopy(action.status)
        return decision

    def _create_pod(self, manifest: dict[str, Any]) -> None:
        uid = f"uid-{manifest['metadata']['name']}"
        view = pod_view({**manifest, "metadata": {**manifest["metadata"], "uid": uid}})
        assert view is not None
        self.pods[view.name] = view

    def delete_deployment(self) -> None:
        """The JobManager's Deployment deleted: the garbage collector takes its pods (JobManager, TaskManagers)."""
        self.deployments.clear()
        self.pods = {
            name: pod for name, pod in self.pods.items() if pod.role not in (PodRole.JOBMANAGER, PodRole.TASKMANAGER)
        }

    def step(self) -> Decision:
        return self.apply(self.decide())

    def run_pods(self, nodes: Iterable[str] = ("n0", "n1", "n2")) -> None:
        """Bind every pending pod (round robin over ``nodes``) and let it run."""
        choices = list(nodes)
        for i, name in enumerate(sorted(p for p, v in self.pods.items() if v.phase == "Pending")):
            self.pods[name] = _with(self.pods[name], phase="Running", node=choices[i % len(choices)])

    def settle(self) -> None:
        """Decide and run pods until nothing changes any more."""
        for _ in range(20):
            decision = self.step()
            self.run_pods()
            if not decision.actions:
                return
        raise AssertionError("the decisions never settled")

    def pass_time(self, until: datetime) -> None:
        self.now = until


def _with(pod: PodView, **changes: Any) -> PodView:
    return PodView(**{**pod.__dict__, **changes})


def kinds(decision: Decision) -> list[str]:
    return [type(action).__name__ for action in decision.actions]


def spark_job(**metadata: Any) -> dict[str, Any]:
    return spark_app(driver={"cores": 1, "memory": "512m"}, executor=esi_executor(), **metadata)


def flink_job(**metadata: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"esi.tu-berlin.de/job": "batchjob-flink"}}}
    return flink_app(taskManager={"replicas": 2, "resource": {"cpu": 1, "memory": "1g"}, "podTemplate": template})


# --- Spark ------------------------------------------------------------------------------------------------


def test_a_spark_application_is_submitted_runs_and_completes() -> None:
    world = World(spark_job())

    submitted = world.step()
    assert kinds(submitted) == ["CreatePod", "WriteStatus"]
    assert list(world.pods) == ["wordcount-driver"]
    assert world.status["applicationState"] == {"state": "SUBMITTED"}
    assert world.status["driverInfo"] == {"podName": "wordcount-driver"}
    assert world.status["sparkApplicationId"] == "spark-9f44a280477d48279bd10f0fb82ecfb4"
    assert (world.status["submissionAttempts"], world.status["executionAttempts"]) == (1, 1)
    assert world.status["lastSubmissionAttemptTime"] == "2026-01-01T12:00:00Z"
    assert world.step().actions == ()  # the driver is not running yet

    world.run_pods()
    running = world.step()
    assert world.status["applicationState"] == {"state": "RUNNING"}
    assert sorted(world.pods) == [
        "wordcount-9f44a280477d4827-exec-1",
        "wordcount-9f44a280477d4827-exec-2",
        "wordcount-driver",
    ]
    assert world.status["executorState"] == {}  # created, not seen yet
    assert [e.reason for e in running.events] == ["SparkApplicationRunning"]

    world.step()
    assert set(world.status["executorState"].values()) == {"PENDING"}
    world.run_pods()
    started = world.step()
    assert set(world.status["executorState"].values()) == {"RUNNING"}
    ends_at = NOW + timedelta(seconds=5)  # 50 s alone, x 0.1
    assert world.annotations[ENDS_AT_ANNOTATION] == ends_at.isoformat()
    assert world.annotations[COLOCATED_ANNOTATION] == ""
    assert FAILURE_ANNOTATION not in world.annotations
    assert started.wake_at == ends_at

    world.pass_time(ends_at - timedelta(milliseconds=1))
    assert world.step().actions == ()
    world.pass_time(ends_at)
    done = world.step()
    assert kinds(done) == ["DeletePod", "DeletePod", "EndPod", "WriteStatus"]
    assert list(world.pods) == ["wordcount-driver"]
    assert world.pods["wordcount-driver"].phase == "Succeeded"
    assert world.status["applicationState"] == {"state": "SUCCEEDING"}
    assert world.status["terminationTime"] == "2026-01-01T12:00:05Z"
    completed = world.step()
    assert kinds(completed) == ["WriteStatus"]
    assert [e.reason for e in completed.events] == ["SparkApplicationCompleted"]
    assert world.status["applicationState"] == {"state": "COMPLETED"}
    assert world.status["executorState"] == {
        "wordcount-9f44a280477d4827-exec-1": "COMPLETED",
        "wordcount-9f44a280477d4827-exec-2": "COMPLETED",
    }
    assert world.status["terminationTime"] == "2026-01-01T12:00:05Z"
    assert world.step().actions == ()


def test_the_run_lasts_what_the_model_says_for_the_jobs_on_its_nodes() -> None:
    world = World(spark_job())
    world.others = {"n0": [NodeExecutor("other-app", "batchjob-flink")], "n9": [NodeExecutor("far", "far-job")]}

    world.settle()

    assert world.annotations[COLOCATED_ANNOTATION] == "batchjob-flink"
    assert world.annotations[ENDS_AT_ANNOTATION] == (NOW + timedelta(seconds=7)).isoformat()  # 70 s x 0.1


def test_a_recorded_plan_is_kept_by_a_restarted_simulator_with_other_settings() -> None:
    world = World(spark_job())
    world.settle()
    plan = RunPlan.of(world.annotations)

    world.settings = SimSettings(InterferenceModel(default_runtime=999), failure_rate=1.0)
    again = world.decide()

    assert again.actions == ()
    assert plan is not None
    assert again.wake_at == plan.ends_at


def test_a_job_arriving_mid_run_slows_the_rest_of_it_down_and_leaving_does_not_speed_it_up() -> None:
    world = World(spark_job())
    world.settle()
    assert world.annotations[ENDS_AT_ANNOTATION] == (NOW + timedelta(seconds=5)).isoformat()  # 50 s alone

    world.pass_time(NOW + timedelta(seconds=2.5))
    world.others = {"n9": [NodeExecutor("far", "batchjob-flink")]}
    assert world.step().actions == ()  # not on its nodes
    world.others = {"n1": [NodeExecutor("late", "batchjob-flink")]}
    slowed = world.step()

    # Half of the work was left; next to flink all of it takes 70 s x 0.1, so half takes 3.5 s.
    ends_at = NOW + timedelta(seconds=6)
    assert kinds(slowed) == ["Annotate"]
    assert world.annotations[ENDS_AT_ANNOTATION] == ends_at.isoformat()
    assert world.annotations[COLOCATED_ANNOTATION] == "batchjob-flink"
    assert slowed.wake_at == ends_at
    assert world.step().actions == ()
    world.others = {}
    world.pass_time(NOW + timedelta(seconds=4))
    assert world.step().actions == ()
    world.pass_time(ends_at)
    assert world.step().actions  # it ends


def test_the_same_view_gives_the_same_decision() -> None:
    world = World(spark_job())
    world.settle()
    world.pass_time(world.now + timedelta(seconds=10))

    assert world.decide() == world.decide()


@pytest.mark.parametrize(
    ("attempt", "fail_attempts", "fails"),
    [
        pytest.param(None, "1", True, id="first attempt, failing one"),
        pytest.param("2", "1", False, id="second attempt, failing one"),
        pytest.param("2", "2", True, id="second attempt, failing two"),
        pytest.param("1", None, False, id="no injection"),
        pytest.param("1", "zero", False, id="unreadable injection"),
    ],
)
def test_failure_injection_by_attempt(attempt: str | None, fail_attempts: str | None, fails: bool) -> None:
    annotations = {ATTEMPT_ANNOTATION: attempt} if attempt else {}
    conf = {"spark.esi.sim.failAttempts": fail_attempts} if fail_attempts else {}
    spark = World(spark_app(executor=esi_executor(), annotations=annotations, sparkConf=conf))
    flink_conf = {"esi.sim.fail-attempts": fail_attempts} if fail_attempts else {}
    flink = World(flink_app(annotations=annotations, flinkConfiguration=flink_conf))

    for world in (spark, flink):
        world.settle()
        plan = RunPlan.of(world.annotations)
        assert plan is not None
        world.pass_time(plan.ends_at)
        world.settle()

    assert spark.status["applicationState"]["state"] == ("FAILED" if fails else "COMPLETED")
    assert flink.status["jobStatus"]["state"] == ("FAILED" if fails else "FINISHED")
    if fails:
        assert "simulated failure: attempt" in spark.status["applicationState"]["errorMessage"]
        assert spark.pods["wordcount-driver"].phase == "Failed"
        assert set(spark.status["executorState"].values()) == {"FAILED"}
        assert flink.status["lifecycleState"] == "FAILED"
        assert "simulated failure" in json.loads(flink.status["error"])["message"]
    assert [p.role.value for p in spark.pods.values()] == ["driver"]
    # The operator keeps a finished application's cluster until the FlinkDeployment is deleted.
    assert sorted(p.role.value for p in flink.pods.values()) == ["jobmanager", "taskmanager"]
    assert flink.step().actions == ()


@pytest.mark.parametrize(("rate", "fails"), [(1.0, True), (0.0, False)])
def test_random_failures_follow_the_rate(rate: float, fails: bool) -> None:
    world = World(spark_job(), SimSettings(SETTINGS.model, failure_rate=rate, seed=7))

    world.settle()

    assert (FAILURE_ANNOTATION in world.annotations) is fails


def test_random_failures_are_the_same_for_the_same_seed_and_application() -> None:
    def failing(seed: int, uid: str) -> bool:
        plan = SimSettings(failure_rate=0.5, seed=seed).plan(spark_app(uid=uid), "j", [], NOW)
        return plan.failure is not None

    uids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(40)]
    first = [failing(1, uid) for uid in uids]

    assert first == [failing(1, uid) for uid in uids]
    assert 0 < sum(first) < len(uids)
    assert first != [failing(2, uid) for uid in uids]


def test_with_jitter_runs_vary_around_the_model_each_application_at_a_pace_of_its_own() -> None:
    settings = SimSettings(SETTINGS.model, seed=3, runtime_jitter=0.1)

    def seconds(uid: str, colocated: tuple[str, ...] = ()) -> float:
        plan = settings.plan(spark_app(uid=uid), "batchjob-spark", colocated, NOW)
        return (plan.ends_at - plan.started_at).total_seconds()

    uids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(400)]
    alone = [seconds(uid) for uid in uids]  # the model: 50 s alone, x 0.1

    assert alone == [seconds(uid) for uid in uids]  # drawn once per application: a restart draws the same
    assert len(set(alone)) == len(uids)
    assert 4.9 < statistics.mean(alone) < 5.1
    assert 0.4 < statistics.stdev(alone) < 0.6
    # Next to flink (70 s) the same application keeps its pace.
    assert [seconds(uid, ("batchjob-flink",)) / seconds(uid) for uid in uids[:5]] == pytest.approx([1.4] * 5)
    assert SimSettings(SETTINGS.model, seed=3).plan(spark_app(uid=uids[0]), "batchjob-spark", (), NOW).ends_at == (
        NOW + timedelta(seconds=5)
    )


def test_a_lost_executor_is_replaced_under_the_next_id_and_the_run_goes_on() -> None:
    world = World(spark_job())
    world.settle()
    plan = RunPlan.of(world.annotations)

    del world.pods["wordcount-9f44a280477d4827-exec-1"]  # deleted: a node lost, an eviction
    replaced = world.step()

    assert kinds(replaced) == ["CreatePod", "WriteStatus"]
    assert sorted(world.pods) == [
        "wordcount-9f44a280477d4827-exec-2",
        "wordcount-9f44a280477d4827-exec-3",
        "wordcount-driver",
    ]
    assert world.status["applicationState"] == {"state": "RUNNING"}
    assert world.status["executorState"]["wordcount-9f44a280477d4827-exec-1"] == "UNKNOWN"
    world.settle()
    assert RunPlan.of(world.annotations) == plan, "the run goes on as planned"
    assert world.status["executorState"]["wordcount-9f44a280477d4827-exec-3"] == "RUNNING"

    world.pods["wordcount-9f44a280477d4827-exec-3"] = _with(
        world.pods["wordcount-9f44a280477d4827-exec-3"], phase="Failed"
    )
    world.settle()  # a failed executor's pod is removed and replaced too
    assert sorted(world.pods) == [
        "wordcount-9f44a280477d4827-exec-2",
        "wordcount-9f44a280477d4827-exec-4",
        "wordcount-driver",
    ]
    assert world.status["executorState"]["wordcount-9f44a280477d4827-exec-3"] == "FAILED"
    assert plan is not None
    world.pass_time(plan.ends_at)
    world.settle()
    assert world.status["applicationState"] == {"state": "COMPLETED"}


def test_more_failed_executors_than_spark_allows_fail_the_application() -> None:
    world = World(
        spark_app(driver={"cores": 1}, executor=esi_executor(), sparkConf={"spark.executor.maxNumFailures": "1"})
    )
    world.settle()

    for _ in range(2):
        executor = next(p for p in world.pods.values() if p.role.value == "executor" and p.phase == "Running")
        world.pods[executor.name] = _with(executor, phase="Failed")
        world.settle()

    assert world.status["applicationState"] == {
        "state": "FAILED",
        "errorMessage": "executor lost: 2 executors failed, more than spark.executor.maxNumFailures (1)",
    }
    assert [p.role.value for p in world.pods.values()] == ["driver"]


def test_an_executor_not_seen_yet_is_created_not_lost() -> None:
    world = World(spark_job())
    world.step()
    world.run_pods()
    world.step()  # RUNNING, executors created

    del world.pods["wordcount-9f44a280477d4827-exec-1"]  # e.g. the watch has not shown it yet
    again = world.step()

    assert kinds(again) == ["CreatePod", "WriteStatus"]
    assert world.status["applicationState"]["state"] == "RUNNING"


def test_a_deleted_driver_fails_a_running_application() -> None:
    world = World(spark_job())
    world.settle()

    del world.pods["wordcount-driver"]
    world.step()

    assert world.status["applicationState"] == {
        "state": "FAILING",
        "errorMessage": "driver pod wordcount-driver was deleted",
    }
    assert world.pods == {}
    world.step()
    assert world.status["applicationState"]["state"] == "FAILED"


def test_a_finished_application_only_clears_what_is_left() -> None:
    world = World(spark_job())
    world.settle()
    status = copy.deepcopy(world.status) | {"applicationState": {"state": "COMPLETED"}}
    world.app["status"] = status

    cleanup = world.step()

    assert kinds(cleanup) == ["DeletePod", "DeletePod", "EndPod"]
    assert world.status == status


def test_a_spec_no_operator_could_run_fails_its_submission() -> None:
    world = World(spark_app(executor={"memory": "lots"}, driver={"memory": "plenty"}))

    world.step()

    assert world.status["applicationState"]["state"] == "SUBMISSION_FAILED"
    assert "spec.driver.memory is 'plenty'" in world.status["applicationState"]["errorMessage"]
    assert world.pods == {}


def test_a_pod_the_api_server_refuses_fails_the_application() -> None:
    world = World(spark_job())
    refused = rejected(world.observation(), "pod wordcount-driver: serviceaccount spark not found")
    world.apply(refused)
    assert world.status["applicationState"] == {
        "state": "SUBMISSION_FAILED",
        "errorMessage": "pod wordcount-driver: serviceaccount spark not found",
    }

    flink = World(flink_job())
    flink.apply(rejected(flink.observation(), "pod x: forbidden"))
    assert (flink.status["lifecycleState"], flink.status["jobStatus"]["state"]) == ("FAILED", "FAILED")


# --- Flink ------------------------------------------------------------------------------------------------


def test_a_flink_deployment_is_deployed_runs_and_finishes() -> None:
    world = World(flink_job())

    world.step()
    assert world.status == {
        "lifecycleState": "CREATED",
        "jobManagerDeploymentStatus": "DEPLOYING",
        "jobStatus": {"state": "RECONCILING", "updateTime": MILLIS},
    }
    assert world.pods == {}

    deployed = world.step()
    assert kinds(deployed) == ["CreateDeployment", "WriteStatus"]
    assert (world.status["lifecycleState"], world.status["jobManagerDeploymentStatus"]) == ("DEPLOYED", "DEPLOYING")
    assert world.status["jobStatus"]["state"] == "RECONCILING"
    assert list(world.deployments) == ["wordcount-flink"]
    (jobmanager,) = world.pods.values()
    assert jobmanager.role is PodRole.JOBMANAGER

    world.step()
    assert world.status["jobManagerDeploymentStatus"] == "DEPLOYED_NOT_READY"  # its pod does not run yet
    assert world.step().actions == ()

    world.run_pods()
    world.step()
    assert world.status["jobManagerDeploymentStatus"] == "READY"
    assert world.status["lifecycleState"] == "STABLE"
    assert world.status["jobStatus"] == {
        "state": "RUNNING",
        "updateTime": MILLIS,
        "jobName": "wordcount-flink",
        "jobId": "2eac75d157484ea9916f3864a74902f2",
        "startTime": MILLIS,
    }
    assert sorted(world.pods)[1:] == ["wordcount-flink-taskmanager-1-1", "wordcount-flink-taskmanager-1-2"]
    assert RunPlan.of(world.annotations) is None  # the TaskManagers do not run yet

    world.run_pods()
    world.step()
    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert plan.ends_at == NOW + timedelta(seconds=6)  # batchjob-flink is unknown: the default 60 s x 0.1
    assert world.annotations[TASKMANAGERS_ANNOTATION] == "1,2"

    world.pass_time(plan.ends_at)
    world.step()
    assert world.status["jobStatus"]["state"] == "FINISHED"
    assert world.status["jobManagerDeploymentStatus"] == "READY"
    assert world.status["lifecycleState"] == "STABLE"
    assert "error" not in world.status
    assert len(world.pods) == 3, "the application cluster stays until the FlinkDeployment is deleted"
    assert world.step().actions == ()
    world.delete_deployment()
    assert world.step().actions == (), "a finished job's cluster is not deployed again"


def test_a_lost_taskmanager_fails_a_job_that_does_not_restart() -> None:
    world = World(flink_job())
    world.settle()

    world.pods["wordcount-flink-taskmanager-1-1"] = _with(world.pods["wordcount-flink-taskmanager-1-1"], phase="Failed")
    world.step()

    assert world.status["lifecycleState"] == "FAILED"
    assert world.status["jobStatus"]["state"] == "FAILED"
    message = json.loads(world.status["error"])["message"]
    assert message == "TaskManager lost: wordcount-flink-taskmanager-1-1 failed"
    assert "wordcount-flink-taskmanager-1-1" in world.pods, "the cluster stays as it is"


@pytest.mark.parametrize(
    "conf",
    [
        pytest.param({"restart-strategy.type": "fixed-delay"}, id="fixed delay"),
        pytest.param({"restart-strategy.type": "exponentialdelay"}, id="exponential delay"),
        pytest.param({"execution.checkpointing.interval": "10 s"}, id="checkpointing on, strategy unset"),
    ],
)
def test_a_lost_taskmanager_of_a_restarting_job_is_replaced_under_a_new_number(conf: dict[str, str]) -> None:
    app = flink_job()
    app["spec"]["flinkConfiguration"] = conf
    world = World(app)
    world.settle()
    plan = RunPlan.of(world.annotations)

    del world.pods["wordcount-flink-taskmanager-1-2"]
    replaced = world.step()

    assert kinds(replaced) == ["CreatePod"]
    assert sorted(n for n, p in world.pods.items() if p.role is PodRole.TASKMANAGER) == [
        "wordcount-flink-taskmanager-1-1",
        "wordcount-flink-taskmanager-1-3",
    ]
    assert world.status["jobStatus"]["state"] == "RUNNING"
    assert RunPlan.of(world.annotations) == plan, "the run goes on"
    world.settle()
    assert world.annotations[TASKMANAGERS_ANNOTATION] == "1,2,3"

    del world.pods["wordcount-flink-taskmanager-1-3"]
    world.step()
    assert "wordcount-flink-taskmanager-1-4" in world.pods, "no number is used twice"


def test_a_taskmanager_lost_before_the_run_started_is_replaced() -> None:
    world = World(flink_job())
    world.step()
    world.step()
    world.run_pods()  # the JobManager
    world.step()  # asks for the TaskManagers
    world.step()  # sees them, pending
    assert world.annotations.get(TASKMANAGERS_ANNOTATION) == "1,2"
    assert all(p.phase == "Pending" for p in world.pods.values() if p.role is PodRole.TASKMANAGER)

    del world.pods["wordcount-flink-taskmanager-1-1"]
    world.step()

    assert "wordcount-flink-taskmanager-1-3" in world.pods
    assert world.status["jobStatus"]["state"] == "RUNNING"


def test_a_jobmanager_deployment_deleted_before_the_job_ended_is_deployed_again() -> None:
    world = World(flink_job())
    world.settle()

    world.delete_deployment()
    redeployed = world.step()

    assert kinds(redeployed)[0] == "CreateDeployment"
    assert list(world.deployments) == ["wordcount-flink"]


def test_executors_of_a_run_that_is_over_do_not_slow_a_new_run_down() -> None:
    world = World(flink_job())
    world.others = {"n0": [NodeExecutor("finished", "batchjob-spark")]}
    world.over = {"finished"}
    world.settle()

    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert plan.colocated == ()


def test_a_job_arriving_next_to_a_running_flink_job_slows_it_down() -> None:
    world = World(flink_job())
    world.settle()
    world.pass_time(NOW + timedelta(seconds=3))  # half of its 6 s alone

    world.others = {"n0": [NodeExecutor("late", "batchjob-spark")]}
    world.step()

    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert plan.colocated == ("batchjob-spark",)
    assert plan.ends_at == NOW + timedelta(seconds=3 + 3 * SETTINGS.model.unknown_pair_factor)


# --- start-up ---------------------------------------------------------------------------------------------

STARTUP_TABLE = """job,colocated_with,mean_runtime_s,samples,stdev_s,mean_startup_s
batchjob-spark,-,50,2,,20
batchjob-spark,batchjob-flink,70,2,,40
batchjob-spark,batchjob-other,60,2,,30
batchjob-flink,-,60,2,,30
batchjob-flink,batchjob-spark,80,2,,50
"""
STARTUP_SETTINGS = SimSettings(InterferenceModel.from_csv(STARTUP_TABLE, time_scale=0.1))


def on_node(executor: dict[str, Any], node: str) -> dict[str, Any]:
    """An executor spec whose pods must go to ``node`` by name, as esi places them in their slots."""
    affinity = slot_node_affinity(None, node_label="slots", node_ids=["0"], node_names=[node])
    template = executor["template"]
    return executor | {"affinity": affinity, "template": template | {"spec": template["spec"] | {"affinity": affinity}}}


@pytest.mark.parametrize(
    ("others", "startup"),
    [
        pytest.param({}, 2, id="alone: 20 s x 0.1"),
        pytest.param({"n0": [NodeExecutor("other-app", "batchjob-flink")]}, 4, id="next to flink on its node"),
        pytest.param({"n9": [NodeExecutor("far", "batchjob-flink")]}, 2, id="flink on another node"),
    ],
)
def test_spark_executors_come_after_the_start_up_counted_from_the_applications_first_sight(
    others: dict[str, list[NodeExecutor]], startup: float
) -> None:
    world = World(spark_app(driver={"cores": 1, "memory": "512m"}, executor=on_node(esi_executor(), "n0")))
    world.settings = STARTUP_SETTINGS
    world.others = others
    due = NOW + timedelta(seconds=startup)

    submitted = world.step()
    assert kinds(submitted) == ["CreatePod", "Annotate", "WriteStatus"]
    assert world.annotations[EXECUTORS_AT_ANNOTATION] == due.isoformat()
    world.others = {}  # decided once: a neighbour leaving does not change it
    world.pass_time(NOW + timedelta(seconds=0.5))
    world.run_pods()
    world.settle()  # the driver runs; nothing more until the start-up is over
    assert sorted(world.pods) == ["wordcount-driver"]
    assert world.decide().wake_at == due
    world.pass_time(due - timedelta(milliseconds=1))
    assert world.step().actions == ()

    world.pass_time(due)
    world.settle()
    assert len(world.pods) == 3
    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert plan.started_at == due


def test_without_a_start_up_nothing_is_recorded_and_the_executors_come_at_once() -> None:
    world = World(spark_job())

    world.settle()

    assert EXECUTORS_AT_ANNOTATION not in world.annotations
    assert len(world.pods) == 3


def test_flink_taskmanagers_come_after_the_start_up() -> None:
    world = World(flink_job(), STARTUP_SETTINGS)

    world.settle()
    assert [pod.role for pod in world.pods.values()] == [PodRole.JOBMANAGER]
    assert world.status["jobStatus"]["state"] == "RUNNING"
    due = NOW + timedelta(seconds=3)  # 30 s alone x 0.1
    assert world.annotations[EXECUTORS_AT_ANNOTATION] == due.isoformat()

    world.pass_time(due)
    world.settle()
    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert (plan.started_at, plan.ends_at) == (due, due + timedelta(seconds=6))


def spark_on(node: str) -> dict[str, Any]:
    return spark_app(driver={"cores": 1, "memory": "512m"}, executor=on_node(esi_executor(), node))


def flink_on(node: str) -> dict[str, Any]:
    """A FlinkDeployment whose TaskManagers must go to ``node`` by name (placement in their pod template)."""
    affinity = slot_node_affinity(None, node_label="slots", node_ids=["0"], node_names=[node])
    template = {"metadata": {"labels": {"esi.tu-berlin.de/job": "batchjob-flink"}}, "spec": {"affinity": affinity}}
    return flink_app(taskManager={"replicas": 2, "resource": {"cpu": 1, "memory": "1g"}, "podTemplate": template})


def sees(world: World, other: World) -> None:
    """``world``'s view of ``other`` as the simulator's caches hold it: the nodes its spec binds its executors to,
    and its executors on their nodes."""
    placement = executor_placement(other.app)
    assert placement is not None
    job, nodes = placement
    uid = other.app["metadata"]["uid"]
    world.placements = {node: [NodeExecutor(uid, job)] for node in nodes}
    world.others = {}
    for pod in other.pods.values():
        held = node_executor(pod)
        if held is not None:
            world.others.setdefault(held[0], []).append(held[1])


def runs_from(world: World, due: datetime) -> None:
    """The application's executors come at ``due``, not a moment earlier, and its run starts then."""
    world.pass_time(due - timedelta(milliseconds=1))
    world.settle()
    assert not any(pod.role.is_executor for pod in world.pods.values())
    world.pass_time(due)
    world.settle()
    plan = RunPlan.of(world.annotations)
    assert plan is not None
    assert plan.started_at == due


def test_two_applications_bound_for_one_node_created_together_both_start_up_next_to_each_other() -> None:
    spark, flink = World(spark_on("n0"), STARTUP_SETTINGS), World(flink_on("n0"), STARTUP_SETTINGS)

    spark.step()  # first: the other is not there yet
    assert spark.annotations[SEEN_AT_ANNOTATION] == NOW.isoformat()
    assert spark.annotations[EXECUTORS_AT_ANNOTATION] == (NOW + timedelta(seconds=2)).isoformat()  # alone
    flink.pass_time(NOW + timedelta(milliseconds=5))
    sees(flink, spark)  # still in its start-up: bound for n0, no executor yet
    flink.settle()
    flink_due = NOW + timedelta(milliseconds=5, seconds=5)  # 50 s next to spark x 0.1
    assert flink.annotations[EXECUTORS_AT_ANNOTATION] == flink_due.isoformat()
    spark.pass_time(NOW + timedelta(seconds=0.5))
    sees(spark, flink)
    spark.run_pods(["n0"])
    spark.settle()  # the driver runs: the start-up is decided again, next to flink
    spark_due = NOW + timedelta(seconds=4)  # 40 s next to flink x 0.1
    assert spark.annotations[EXECUTORS_AT_ANNOTATION] == spark_due.isoformat()
    assert spark.decide().wake_at == spark_due

    runs_from(spark, spark_due)
    runs_from(flink, flink_due)


def test_a_partner_created_later_extends_the_start_up_at_the_next_wake_up_and_never_shortens_it() -> None:
    spark = World(spark_on("n0"), STARTUP_SETTINGS)
    spark.settle()
    spark.run_pods(["n0"])
    spark.settle()
    alone = NOW + timedelta(seconds=2)
    assert spark.decide().wake_at == alone
    flink = World(flink_on("n0"), STARTUP_SETTINGS)
    sees(spark, flink)  # created a moment later; nothing wakes the spark application before its due moment

    spark.pass_time(alone)
    woken = spark.step()
    paired = NOW + timedelta(seconds=4)
    assert kinds(woken) == ["Annotate"]
    assert spark.annotations[EXECUTORS_AT_ANNOTATION] == paired.isoformat()
    assert woken.wake_at == paired
    spark.over.add(flink.app["metadata"]["uid"])  # its partner over before it ran: the due moment stays

    runs_from(spark, paired)


def test_a_neighbour_whose_run_is_over_does_not_count_for_the_start_up() -> None:
    spark, flink = World(spark_on("n0"), STARTUP_SETTINGS), World(flink_on("n0"), STARTUP_SETTINGS)
    flink.settle()
    flink.pass_time(NOW + timedelta(seconds=3))
    flink.settle()
    flink.run_pods(["n0"])
    flink.settle()
    assert any(pod.role.is_executor and pod.node == "n0" for pod in flink.pods.values())
    sees(spark, flink)
    spark.over.add(flink.app["metadata"]["uid"])
    spark.placements["n0"].append(NodeExecutor("other-app", "batchjob-other"))  # in its start-up, bound for n0

    spark.settle()
    spark.run_pods(["n0"])
    spark.settle()

    # 30 s next to the other job x 0.1, not flink's 40 s
    assert spark.annotations[EXECUTORS_AT_ANNOTATION] == (NOW + timedelta(seconds=3)).isoformat()
