"""Every run kept: each final run record becomes a Run object once, named by its job and ordinal, labelled for
selection, the same as the BatchJob's history holds — whatever crashes and stale views come between the
Run's creation and the status write — and retention lets go of the oldest only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esi.decisions.batchjob_lifecycle import (
    DELETED_WHILE_RUNNING,
    ApplicationPhase,
    ApplicationView,
    BatchJobObservation,
    Holder,
    KeepRun,
    Neighbour,
    decide_batchjob,
    runs_to_keep,
    runs_to_keep_when_deleted,
)
from esi.objects.names import JOB_LABEL, MANAGED_BY_LABEL, TESTBED_LABEL
from esi.objects.runs import (
    SCHEDULING_LABEL,
    KeptRun,
    Retention,
    label_value,
    run_manifest,
    run_name,
    runs_to_prune,
)
from esi.resources.batchjob import MAX_RUNS, BatchJob, BatchJobStatus, RunOutcome, RunRecord
from esi.resources.meta import NAME_PATTERN
from esi.resources.run import Run, RunKind

patient = settings(deadline=None)  # the machine may be busy
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
UID = "3f2a9c1b-0000-4000-8000-000000000001"

# Object names as the API server accepts them: DNS-1123 subdomains up to 253 characters.
label_part = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
names = st.lists(label_part, min_size=1, max_size=8).map(".".join).filter(lambda n: len(n) <= 253)


def batchjob(name: str = "wordcount", namespace: str = "team-a", *, flink: bool = False) -> BatchJob:
    application = (
        {"flinkSpec": {"job": {"jarURI": "local:///wc.jar"}, "serviceAccount": "flink"}}
        if flink
        else {
            "sparkSpec": {
                "type": "Scala",
                "mainApplicationFile": "local:///pi.jar",
                "driver": {"serviceAccount": "spark"},
            }
        }
    )
    return BatchJob.model_validate(
        {"metadata": {"name": name, "namespace": namespace, "uid": UID}, "spec": application}
    )


RECORD = RunRecord(
    scheduling="weekly",
    attempt=2,
    testbed="tb",
    slots=[0, 2],
    submitted=T0,
    nodes=["n0", "n1"],
    colocated_jobs=["pagerank"],
    start=T0 + timedelta(seconds=3),
    end=T0 + timedelta(seconds=93.5),
    outcome=RunOutcome.SUCCEEDED,
)


# --- names and labels ---------------------------------------------------------------------------------


def test_a_run_is_named_by_its_job_its_jobs_uid_and_its_ordinal() -> None:
    assert run_name("wordcount", UID, 17) == "wordcount-3f2a9c1b-17"


@patient
@given(job=names, ordinal=st.integers(1, 10**9))
def test_every_job_name_gives_valid_run_names_one_per_ordinal(job: str, ordinal: int) -> None:
    name = run_name(job, UID, ordinal)

    assert len(name) <= 253
    assert re.match(NAME_PATTERN, name), name
    assert name != run_name(job, UID, ordinal + 1)
    assert name != run_name(job, "00000000-1111", ordinal), "a job of the same name created again"
    assert name == run_name(job, UID, ordinal), "the same run, the same name: created again, it is there"


@patient
@given(name=names)
def test_every_name_gives_a_valid_label_value_the_name_itself_when_it_fits(name: str) -> None:
    value = label_value(name)

    assert len(value) <= 63
    assert LABEL_VALUE.match(value), value
    assert (value == name) == (len(name) <= 63)


def test_a_long_name_is_cut_and_ends_in_a_digest_of_the_whole() -> None:
    long, other = "a" * 60 + ".b" * 10, "a" * 60 + ".c" * 10
    assert label_value(long) != label_value(other)
    assert label_value(long).startswith("a" * 54 + "-")


# --- the Run object -------------------------------------------------------------------------------------


@pytest.mark.parametrize("flink", [False, True], ids=["spark", "flink"])
def test_a_run_holds_its_record_its_job_and_labels_and_no_owner(flink: bool) -> None:
    manifest = run_manifest(batchjob(flink=flink), 17, RECORD)
    run = Run.model_validate(manifest)

    assert run.metadata.name == "wordcount-3f2a9c1b-17"
    assert run.metadata.namespace == "team-a"
    assert "ownerReferences" not in manifest["metadata"], "it outlives its BatchJob and its Scheduling"
    assert run.metadata.labels == {
        JOB_LABEL: "wordcount",
        SCHEDULING_LABEL: "weekly",
        TESTBED_LABEL: "tb",
        MANAGED_BY_LABEL: "esi",
    }
    spec = run.spec
    assert RunRecord.model_validate(spec.model_dump(include=set(RunRecord.model_fields))) == RECORD
    assert (spec.job, spec.job_uid, spec.ordinal) == ("wordcount", UID, 17)
    assert spec.kind == (RunKind.FLINK if flink else RunKind.SPARK)
    assert spec.runtime_seconds == 90.5


def test_a_run_without_an_end_has_no_runtime() -> None:
    open_record = RECORD.model_copy(update={"end": None, "outcome": None})
    assert "runtimeSeconds" not in run_manifest(batchjob(), 1, open_record)["spec"]


# --- which runs are kept, and when ----------------------------------------------------------------------


def history(
    *schedulings: str, run_count: int | None = None, kept: int = 0, held_by: str | None = None
) -> BatchJobStatus:
    runs = [RECORD.model_copy(update={"scheduling": s}) for s in schedulings]
    count = len(runs) if run_count is None else run_count
    return BatchJobStatus(runs=runs, run_count=count, kept_runs=kept, scheduling=held_by)


@dataclass(frozen=True)
class ToKeep:
    status: BatchJobStatus
    ordinals: tuple[int, ...]


TO_KEEP = {
    "no-runs-nothing": ToKeep(history(), ()),
    "released-all": ToKeep(history("a", "b"), (1, 2)),
    "the-last-still-held-may-still-learn-its-neighbours": ToKeep(history("a", "b", held_by="b"), (1,)),
    "an-earlier-run-of-the-holder-is-final": ToKeep(history("b", "b", held_by="b"), (1,)),
    "held-by-another-the-last-is-final": ToKeep(history("a", "b", held_by="c"), (1, 2)),
    "kept-ones-are-not-kept-again": ToKeep(history("a", "b", "c", kept=2), (3,)),
    "ordinals-count-runs-the-history-dropped": ToKeep(
        history("a", "b", run_count=MAX_RUNS + 7, kept=MAX_RUNS + 6), (57,)
    ),
    "all-kept": ToKeep(history("a", "b", kept=2), ()),
    "kept-before-an-upgrade-to-runs-of-their-own": ToKeep(history("a", "b", run_count=9), (8, 9)),
}


@pytest.mark.parametrize("case", TO_KEEP.values(), ids=TO_KEEP.keys())
def test_final_records_not_yet_kept_are_kept(case: ToKeep) -> None:
    assert [k.ordinal for k in runs_to_keep(case.status)] == list(case.ordinals)


def test_a_decision_keeps_final_runs_first_and_counts_them_kept() -> None:
    decided = decide_batchjob(history("a", "b"), BatchJobObservation(None, None), generation=1, now=T0)

    assert decided.actions == (
        KeepRun(1, RECORD.model_copy(update={"scheduling": "a"})),
        KeepRun(2, RECORD.model_copy(update={"scheduling": "b"})),
    )
    assert decided.status.kept_runs == 2
    again = decide_batchjob(decided.status, BatchJobObservation(None, None), generation=1, now=T0)
    assert again.actions == ()


def test_a_released_run_is_kept_on_the_decision_after_the_one_that_released_it() -> None:
    # Kept as the status was written: a decision whose write fails is made again, perhaps at another time.
    held = history("a", held_by="a")
    released = decide_batchjob(held, BatchJobObservation(None, None), generation=1, now=T0)

    assert released.actions == ()
    assert released.decide_again_in == 0.0, "decided again at once, to keep it"
    kept = decide_batchjob(released.status, BatchJobObservation(None, None), generation=1, now=T0)
    assert [a.ordinal for a in kept.actions if isinstance(a, KeepRun)] == [1]


def test_a_kept_record_learns_nothing_more_when_a_scheduling_of_its_name_holds_the_job_again() -> None:
    kept = history("a", kept=1)
    again = BatchJobObservation(
        Holder("a", "tb", (5,)), None, slot_nodes=("n9",), neighbours=(Neighbour("late", "n0", T0),)
    )
    held = decide_batchjob(kept, again, generation=1, now=T0)
    decided = decide_batchjob(held.status, again, generation=1, now=T0)

    assert decided.status.runs[-1] == kept.runs[-1]


def test_keeping_no_runs_the_decision_keeps_none_and_counts_none_kept() -> None:
    held = history("a", "b", held_by="b")
    released = decide_batchjob(held, BatchJobObservation(None, None), generation=1, now=T0, keeps_runs=False)

    assert released.actions == ()
    assert released.status.kept_runs == 0
    assert released.decide_again_in is None, "nothing to keep on the next decision"


# --- a BatchJob deleted: every run not yet kept is kept before it goes ------------------------------------------

OPEN = RECORD.model_copy(update={"end": None, "outcome": None})

WHEN_DELETED = {
    "never-ran-nothing": ToKeep(history(held_by="a"), ()),
    "released-all-kept-already-nothing": ToKeep(history("a", "b", kept=2), ()),
    "the-last-still-held-is-final-now": ToKeep(history("a", "b", kept=1, held_by="b"), (2,)),
    "every-run-not-kept-oldest-first": ToKeep(history("a", "b", held_by="b"), (1, 2)),
    "an-open-run-too": ToKeep(BatchJobStatus(runs=[RECORD, OPEN], run_count=9, kept_runs=8, scheduling="weekly"), (9,)),
    "kept-before-an-upgrade-to-runs-of-their-own": ToKeep(history("a", run_count=MAX_RUNS + 3), (53,)),
}


@pytest.mark.parametrize("case", WHEN_DELETED.values(), ids=WHEN_DELETED.keys())
def test_a_deleted_job_keeps_every_run_not_yet_kept(case: ToKeep) -> None:
    kept = runs_to_keep_when_deleted(case.status, now=T0)

    assert [k.ordinal for k in kept] == list(case.ordinals)
    recorded = dict(case.status.numbered_runs())
    closed = [k for k in kept if recorded[k.ordinal].end is not None]
    assert all(k.record == recorded[k.ordinal] for k in closed), "a closed run's Run holds what the history holds"


def test_a_run_still_open_when_its_job_is_deleted_is_kept_cancelled_then() -> None:
    assert runs_to_keep_when_deleted(None, now=T0) == (), "never decided: nothing ran"
    (kept,) = runs_to_keep_when_deleted(BatchJobStatus(runs=[OPEN], run_count=1, scheduling="weekly"), now=T0)

    assert kept.record == OPEN.model_copy(
        update={"end": T0, "outcome": RunOutcome.CANCELLED, "reason": DELETED_WHILE_RUNNING}
    )


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_a_deletion_interrupted_keeps_the_rest_when_decided_again_and_changes_no_run(crash_after: int) -> None:
    deleted = BatchJobStatus(runs=[RECORD, RECORD, OPEN], run_count=3, scheduling="weekly")
    runs: dict[int, RunRecord] = {}  # the Run objects: one created again is there already (409)
    for keep in runs_to_keep_when_deleted(deleted, now=T0)[:crash_after]:
        runs.setdefault(keep.ordinal, keep.record)
    before = dict(runs)
    for keep in runs_to_keep_when_deleted(deleted, now=T0 + timedelta(minutes=1)):  # after the operators' restart
        runs.setdefault(keep.ordinal, keep.record)

    assert sorted(runs) == [1, 2, 3]
    assert {o: runs[o] for o in before} == before
    assert runs[3].outcome == RunOutcome.CANCELLED


# A simulated shell around the decision: it creates the Runs a decision asks for, then writes the status guarded by
# the version the decision saw. Crashes stop it anywhere in between, and decisions may be made on a stale view.


@dataclass
class Shell:
    stored: list[BatchJobStatus] = field(default_factory=lambda: [BatchJobStatus()])  # every version written
    runs: dict[int, RunRecord] = field(default_factory=dict)  # the Run objects, by ordinal

    def reconcile(self, observation: BatchJobObservation, now: datetime, *, stale: bool, crash_at: int | None) -> None:
        seen = len(self.stored) - (2 if stale and len(self.stored) > 1 else 1)
        decided = decide_batchjob(self.stored[seen], observation, generation=1, now=now)
        keeps = [a for a in decided.actions if isinstance(a, KeepRun)]
        for step, keep in enumerate(keeps):
            if crash_at == step:
                return
            # The API server: a Run created again is there already (409), and no Run ever changes.
            assert self.runs.setdefault(keep.ordinal, keep.record) == keep.record, f"run {keep.ordinal} changed"
        if crash_at is not None or seen != len(self.stored) - 1:  # crashed before the write, or a stale view
            return
        if decided.status != self.stored[-1]:
            self.stored.append(decided.status)


def a_run(i: int) -> list[BatchJobObservation]:
    holder = Holder(f"sched-{i // 2}", "tb", (0,))  # names come again: a Scheduling deleted and created again
    running = ApplicationView(
        ApplicationPhase.RUNNING, executors=1, executors_bound=1, executors_running=1, nodes=("n0",)
    )
    done = ApplicationView(ApplicationPhase.SUCCEEDED, executors=1, executors_bound=1, nodes=("n0",))
    late = Neighbour(f"late-{i}", "n0", T0, None)  # a job recorded after this one ended, that met it
    return [
        BatchJobObservation(holder, None, slot_nodes=("n0",)),
        BatchJobObservation(holder, running, slot_nodes=("n0",)),
        BatchJobObservation(holder, done, slot_nodes=("n0",)),
        BatchJobObservation(holder, None, slot_nodes=("n0",), neighbours=(late,)),
        BatchJobObservation(None, None),
    ]


@patient
@given(
    runs=st.integers(1, 8),
    faults=st.lists(st.tuples(st.booleans(), st.none() | st.integers(0, 2)), max_size=120),
)
def test_every_run_becomes_one_run_object_as_its_history_had_it_whatever_crashes(
    runs: int, faults: list[tuple[bool, int | None]]
) -> None:
    shell = Shell()
    script = [o for i in range(runs) for o in a_run(i)]
    tick = 0
    for observation in script:
        # Each observation is decided until one decision on it goes through whole (then twice more).
        clean = 0
        while clean < 3:
            stale, crash_at = faults[tick] if tick < len(faults) else (False, None)  # then, a quiet spell
            tick += 1
            shell.reconcile(observation, T0 + timedelta(seconds=tick), stale=stale, crash_at=crash_at)
            clean += not stale and crash_at is None
    for _ in range(3):  # quiet: the operators decide again
        shell.reconcile(BatchJobObservation(None, None), T0 + timedelta(seconds=tick), stale=False, crash_at=None)

    final = shell.stored[-1]
    assert final.run_count == runs
    assert final.kept_runs == runs
    assert sorted(shell.runs) == list(range(1, runs + 1)), "every run kept, once"
    for ordinal, record in final.numbered_runs():
        assert shell.runs[ordinal] == record, "the Run holds what the history holds"
        assert f"late-{ordinal - 1}" in record.colocated_jobs, "what it learned while held is in its Run"


# --- retention --------------------------------------------------------------------------------------------


def kept(namespace: str, name: str, minutes: int) -> KeptRun:
    return KeptRun(namespace, name, T0 + timedelta(minutes=minutes))


@dataclass(frozen=True)
class Pruning:
    runs: tuple[KeptRun, ...]
    retention: Retention
    pruned: tuple[str, ...]


NOW = T0 + timedelta(days=10)
PRUNING = {
    "within-the-count-none": Pruning((kept("a", "r1", 1), kept("a", "r2", 2)), Retention(keep=2), ()),
    "beyond-the-count-the-oldest": Pruning(
        (kept("a", "r2", 2), kept("a", "r1", 1), kept("a", "r3", 3)), Retention(keep=2), ("r1",)
    ),
    "counted-per-namespace": Pruning(
        (kept("a", "a1", 1), kept("b", "b1", 2), kept("b", "b2", 3)), Retention(keep=1), ("b1",)
    ),
    "same-time-the-name-decides": Pruning((kept("a", "x", 1), kept("a", "y", 1)), Retention(keep=1), ("x",)),
    "older-than-the-age": Pruning(
        (kept("a", "old", 0), kept("a", "new", 60 * 24 * 10)), Retention(max_age=timedelta(days=1)), ("old",)
    ),
    "keep-none": Pruning((kept("a", "r1", 1),), Retention(keep=0), ("r1",)),
    "the-default-keeps-them": Pruning(tuple(kept("a", f"r{i}", i) for i in range(100)), Retention(), ()),
}


@pytest.mark.parametrize("case", PRUNING.values(), ids=PRUNING.keys())
def test_retention_lets_go_of_the_oldest(case: Pruning) -> None:
    assert [r.name for r in runs_to_prune(case.runs, case.retention, now=NOW)] == list(case.pruned)


@patient
@given(
    runs=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1000)), max_size=60, unique=True),
    keep=st.integers(0, 20),
)
def test_each_namespace_keeps_its_newest_runs(runs: list[tuple[str, int]], keep: int) -> None:
    all_runs = [kept(namespace, f"r{minute}", minute) for namespace, minute in runs]
    pruned = set(runs_to_prune(all_runs, Retention(keep=keep), now=NOW))

    for namespace in "abc":
        mine = sorted((r for r in all_runs if r.namespace == namespace), key=lambda r: r.created)
        left = [r for r in mine if r not in pruned]
        assert len(left) == min(len(mine), keep)
        assert left == mine[len(mine) - len(left) :], "the newest stay"
