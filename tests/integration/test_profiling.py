"""The profiling scheduler (``examples/profiling``) against the whole local stack, with the thesis' workload.

The simulated operator (``esi_sim``) runs every job as long as ``sim/data/colocation-thesis.csv`` says it
runs next to the jobs on its node, times ``TIME_SCALE``; the jobs are ``examples/manifests/``'s, named as
in that table. So the matrix the profiler learns can be checked against the model it came from.

**What is compared, and why so.** A run's start and end are the moments esi's BatchJob reconciler notices
them (run records have milliseconds), each a little late: tens of milliseconds on a quiet machine, up to a
few hundred on a loaded one. At this time scale ``TICK`` = 100 modelled seconds is one second of wall-clock
time, so one sample can be off by tens of modelled seconds, and a test of a few minutes gets one or two
samples per pair. A job that joins a running one slows the rest of its run down in the simulation
(``sim.lifecycle``), so which of a pair started first does not matter. The test checks:

- coverage: after the rounds, every ordered pair has a sample, and the samples in the jobs are exactly the
  runs the profiler recorded (none counted twice, also across a crash);
- a small overhead: the mean of learned minus modelled over all pairs (the end noticed later than the
  start, on average) is under half a tick;
- every entry within half a tick of the modelled runtime plus that overhead (the noticing delays vary);
- the jobs in the order of their modelled mean runtimes, where the means are at least a tick apart:
  batchjob-sample3, then spark-crawler, then the rest.

``ESI_PROFILING_ROUNDS=N`` runs N rounds instead of 10 — the full experiment, whose figures it prints.

The ``set_up`` fixture asks for ``sim_crds`` before the stack: when esi's reconcilers start before the
SparkApplication and FlinkDeployment CRDs exist, kopf now and then never starts watching those kinds once
they appear, and every BatchJob then waits forever for its finished application (seen in about one session
of four).
"""

from __future__ import annotations

import asyncio
import csv
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from esi.client import AsyncEsiClient, EsiClient
from examples.profiling.matrix import ColocationMatrix, Entry, Rejected, with_profile_entry
from examples.profiling.runner import Loop, Outcome, Settings, run
from infra.local_cluster import LocalCluster
from sim.runtime import DEFAULT_TABLE, InterferenceModel
from tests.integration.conftest import AddNodes, EsiApi
from tests.integration.kube import create_in, wait_for
from tests.integration.sim_fixtures import TIME_SCALE

MANIFESTS = Path(__file__).parents[2] / "examples" / "manifests"
MODEL = InterferenceModel.from_csv(DEFAULT_TABLE)
JOBS = sorted({job for job, _ in MODEL.pairs})
TICK = 1 / TIME_SCALE  # one second of wall-clock time, in modelled seconds
ROUNDS = int(os.environ.get("ESI_PROFILING_ROUNDS", "10"))
TOP_UP_ROUNDS = 6  # extra single rounds if a pair is still unmeasured (a partner that ended too early)


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc]


SetUp = Callable[..., None]


@pytest.fixture
def set_up(
    sim_crds: LocalCluster,  # before the stack: see the module docstring
    esi_stack: LocalCluster,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
) -> SetUp:
    """``set_up(profiler_slots=1, ...)``: examples/manifests' jobs in the test's namespace, and each named
    Testbed on that many new nodes of its own."""

    def create(**testbeds: int) -> None:
        for manifest in [*documents("serviceaccount.yaml"), *documents("batchjobs.yaml")]:
            create_in(esi_stack, namespace, manifest)
        manifests = {doc["metadata"]["name"]: doc for doc in documents("testbeds.yaml")}
        for testbed, nodes in testbeds.items():
            name = testbed.replace("_", "-")
            label = f"esi.test/{name}-{unique}"
            for i in range(nodes):
                add_nodes(1, cpu="4", memory="8Gi", labels={label: str(i)})
            manifest = manifests[name]
            create_in(esi_stack, namespace, manifest | {"spec": manifest["spec"] | {"nodeLabel": label}})

    return create


def run_loops(endpoint: EsiApi, namespace: str, settings: Settings, loops: Sequence[Loop], timeout: float) -> Outcome:
    async def go() -> Outcome:
        async with AsyncEsiClient(endpoint.url, token=endpoint.token, namespace=namespace) as client:
            return await asyncio.wait_for(run(client, settings, loops), timeout)

    return asyncio.run(go())


def client_for(endpoint: EsiApi, namespace: str) -> EsiClient:
    return EsiClient(endpoint.url, token=endpoint.token, namespace=namespace)


def learned(endpoint: EsiApi, namespace: str) -> ColocationMatrix:
    with client_for(endpoint, namespace) as client:
        return ColocationMatrix.of_jobs(client.jobs().values())


def schedulings(endpoint: EsiApi, namespace: str) -> list[str]:
    with client_for(endpoint, namespace) as client:
        return sorted(s.name for s in client.schedulings())


def report(matrix: ColocationMatrix, took: float, rounds: int) -> str:
    """What the experiment tutorial quotes: the learned matrix, learned vs modelled per entry, how close they are."""
    lines = [f"{rounds} profiling rounds in {took:.0f}s", matrix.render(), "job, partner: learned (samples) / modelled"]
    errors = {(a, b): matrix.entry(a, b).seconds - MODEL.runtime(a, [b]) for a, b in matrix.pairs()}
    for (a, b), error in errors.items():
        lines.append(f"  {a}, {b}: {matrix.entry(a, b)} / {MODEL.runtime(a, [b]):.0f} ({error:+.0f})")
    overhead = statistics.mean(errors.values())
    residuals = [abs(error - overhead) for error in errors.values()]
    lines.append(
        f"overhead (mean learned - modelled) {overhead:+.1f}s; after it, entries off by "
        f"{statistics.mean(residuals):.1f}s on average, {max(residuals):.0f}s at most"
    )
    for job in JOBS:
        partners = [p for p in JOBS if p != job]
        by_model = sorted(partners, key=lambda p: MODEL.runtime(job, [p]))
        by_learning = sorted(partners, key=lambda p: matrix.entry(job, p).seconds)
        lines.append(f"  {job}: partners best first, modelled {by_model}, learned {by_learning}")
    return "\n".join(lines)


def test_the_profiler_learns_the_modelled_matrix(
    set_up: SetUp,
    esi_endpoint: EsiApi,
    namespace: str,
) -> None:
    set_up(profiler_slots=1)
    # A profiling Scheduling left behind by a profiler that crashed: finished and recorded before any round.
    crashed = "profiler-scheduling-crashed"
    with client_for(esi_endpoint, namespace) as client:
        client.submit_slots(crashed, "profiler-slots", {"spark-crawler": [0], "batchjob-spark": [1]}, strict=False)
    settings = Settings(rounds=ROUNDS, time_scale=TIME_SCALE, retry_delay=1, round_timeout=120)

    started = time.monotonic()
    outcomes = [run_loops(esi_endpoint, namespace, settings, ["profiler"], timeout=60 + 20 * ROUNDS)]
    single = Settings(rounds=1, time_scale=TIME_SCALE, retry_delay=1, round_timeout=120)
    for _ in range(TOP_UP_ROUNDS):
        so_far = learned(esi_endpoint, namespace)
        if all(so_far.entry(*pair).samples for pair in so_far.pairs()):
            break
        # The last round's Scheduling is recorded and deleted, but listed until its finalizer is done; a new
        # profiler would take it for a leftover and finish it again (recording nothing twice, but listing it).
        wait_for("the last round's Scheduling gone", lambda: not schedulings(esi_endpoint, namespace))
        outcomes.append(run_loops(esi_endpoint, namespace, single, ["profiler"], timeout=60))
    took = time.monotonic() - started
    matrix = learned(esi_endpoint, namespace)
    print(f"\n{report(matrix, took, sum(len(o.profiled) for o in outcomes))}")

    profiled = [pair for outcome in outcomes for pair in outcome.profiled]
    assert (profiled[0].scheduling, profiled[0].jobs) == (crashed, ("spark-crawler", "batchjob-spark"))
    assert len({pair.scheduling for pair in profiled}) == len(profiled), "a Scheduling was finished twice"
    wait_for("every profiling Scheduling deleted", lambda: not schedulings(esi_endpoint, namespace))
    samples = sum(not isinstance(seconds, Rejected) for pair in profiled for seconds in pair.recorded.values())
    assert sum(entry.samples for entry in matrix.entries.values()) == samples, "each recorded run is one sample"
    unmeasured = [pair for pair in matrix.pairs() if not matrix.entry(*pair).samples]
    assert not unmeasured, f"pairs without a sample: {unmeasured}"

    errors = {(a, b): matrix.entry(a, b).seconds - MODEL.runtime(a, [b]) for a, b in matrix.pairs()}
    overhead = statistics.mean(errors.values())
    assert abs(overhead) < TICK / 2, f"learned runtimes are off by {overhead:.0f}s on average"
    far = {pair: round(error) for pair, error in errors.items() if abs(error - overhead) > TICK / 2}
    assert not far, f"entries farther than half a tick ({TICK / 2:.0f}s) from the model: {far}"
    means = {job: statistics.mean(matrix.entry(job, p).seconds for p in JOBS if p != job) for job in JOBS}
    slowest_first = sorted(means, key=means.__getitem__, reverse=True)
    assert slowest_first[:2] == ["batchjob-sample3", "spark-crawler"], means

    printed = subprocess.run(
        [sys.executable, "-m", "examples.profiling", "--url", esi_endpoint.url, "-n", namespace, "--just-print"],
        env=os.environ | {"ESI_TOKEN": esi_endpoint.token},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert printed.rstrip("\n") == matrix.render(), "--just-print shows the matrix the jobs hold"


def thesis_profiles() -> dict[str, dict[str, list[dict[str, str]]]]:
    """Each job's externalScheduler data holding the thesis' measured row, as a profiler would leave it."""
    data: dict[str, dict[str, list[dict[str, str]]]] = {}
    with DEFAULT_TABLE.open() as table:
        for row in csv.DictReader(table):
            entry = Entry(round(float(row["mean_runtime_s"])), int(row["samples"]))
            data[row["job"]] = with_profile_entry(data.get(row["job"]), row["colocated_with"], entry, "thesis")
    return data


def test_the_scheduler_pairs_each_job_with_its_best_partner(
    set_up: SetUp,
    esi_endpoint: EsiApi,
    namespace: str,
) -> None:
    set_up(scheduler_slots=3)
    with client_for(esi_endpoint, namespace) as client:
        for job, data in thesis_profiles().items():
            client.set_external_scheduler(job, data)
    settings = Settings(rounds=1, time_scale=TIME_SCALE, retry_delay=1, round_timeout=120)

    outcome = run_loops(esi_endpoint, namespace, settings, ["scheduler"], timeout=120)
    # The first Scheduling finished is the round's; a second one means the submit was answered with an
    # error although the Scheduling was written, and the round then ran again after finishing it.
    scheduled = outcome.scheduled[0]

    # All jobs idle and never run by the scheduler: the round is the first three by name, one per node.
    # flink's best partner is flink2 (24 s); flink2's would be flink (24 s), but then sample3 would be left
    # only itself, so flink2 gets sample3 (30 s) and sample3 gets flink.
    flink, flink2, sample3 = "batchjob-flink", "batchjob-flink2", "batchjob-sample3"
    assert scheduled.queue == (flink, flink2, sample3, flink2, sample3, flink)
    assert scheduled.state == "CompletedState"
    assert all(not isinstance(r, Rejected) for r in scheduled.runtimes.values()), scheduled.runtimes
    with client_for(esi_endpoint, namespace) as client:
        slots = {
            job: sorted(run.slots)
            for job in (flink, flink2, sample3)
            for run in client.job(job).scheduled_events
            if run.scheduling.name == scheduled.scheduling
        }
        nodes = {slot.position: node for node, table in client.testbed("scheduler-slots").slots_by_node.items()
                 for slot in table}  # fmt: skip
    assert slots == {flink: [0, 5], flink2: [1, 3], sample3: [2, 4]}
    together = {frozenset(job for job, ids in slots.items() if any(nodes[i] == node for i in ids))
                for node in set(nodes.values())}  # fmt: skip
    assert together == {frozenset({flink, flink2}), frozenset({flink2, sample3}), frozenset({sample3, flink})}
    wait_for("the Scheduling deleted", lambda: not schedulings(esi_endpoint, namespace))


# The example as started at a terminal, where Ctrl-C interrupts: SIGINT handled as Python does by default, also when
# the suite runs with it ignored (a background job of a non-interactive shell, `make test &`, passes SIG_IGN down to
# every process it starts, and Python then leaves SIGINT ignored).
AT_A_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('examples.profiling', run_name='__main__', alter_sys=True)"
)


def test_both_loops_run_side_by_side_and_carry_on_after_ctrl_c(
    set_up: SetUp,
    esi_endpoint: EsiApi,
    namespace: str,
    tmp_path: Path,
) -> None:
    set_up(profiler_slots=1, scheduler_slots=3)
    arguments = ["--url", esi_endpoint.url, "-n", namespace, "--time-scale", str(TIME_SCALE)]
    command = [sys.executable, "-m", "examples.profiling", *arguments]
    env = os.environ | {"ESI_TOKEN": esi_endpoint.token, "PYTHONFAULTHANDLER": "1"}

    def both_loops_busy() -> bool:
        names = schedulings(esi_endpoint, namespace)
        return all(
            any(n.startswith(f"{prefix}-") for n in names) for prefix in ("profiler-scheduling", "example-scheduling")
        )

    first_log = tmp_path / "first.log"
    with first_log.open("w") as out:
        first = subprocess.Popen(
            [sys.executable, "-c", AT_A_TERMINAL, *arguments], env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            wait_for("a Scheduling of each loop at once", both_loops_busy, timeout=60)
            first.send_signal(signal.SIGINT)
            try:
                code = first.wait(timeout=20)
            except subprocess.TimeoutExpired:
                first.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack into the log
                first.wait(timeout=10)
                pytest.fail(f"still running 20 s after Ctrl-C:\n{first_log.read_text()}")
            assert code == 130, first_log.read_text()
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
    assert "interrupted; a Scheduling still running is finished by the next start" in first_log.read_text()
    left = schedulings(esi_endpoint, namespace)
    assert left, "Ctrl-C leaves the Schedulings in flight to the next start"

    second = subprocess.run(
        [*command, "--rounds", "1"], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert second.returncode == 0, second.stderr
    for name in left:
        assert f"finishing {name}, left by an earlier run" in second.stderr
    wait_for("every Scheduling deleted", lambda: not schedulings(esi_endpoint, namespace))
    matrix = learned(esi_endpoint, namespace)
    assert matrix.entries, f"nothing recorded: {second.stderr}"


def test_the_example_manifests_apply_as_they_are(esi_crds: LocalCluster, namespace: str) -> None:
    # A server-side dry run: the API server validates every object (the CRDs' schemas and CEL rules
    # included) and creates nothing, so the shared cluster gets no nodes by these fixed names.
    applied = esi_crds.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(MANIFESTS))
    expected = [
        "node/esi-profiler-0",
        *(f"node/esi-scheduler-{i}" for i in range(3)),
        "serviceaccount/flink",
        "role.rbac.authorization.k8s.io/flink-jobmanager",
        "rolebinding.rbac.authorization.k8s.io/flink-jobmanager",
        "serviceaccount/spark",
        "role.rbac.authorization.k8s.io/spark-driver",
        "rolebinding.rbac.authorization.k8s.io/spark-driver",
        "testbed.esi.tu-berlin.de/profiler-slots",
        "testbed.esi.tu-berlin.de/scheduler-slots",
        *(f"batchjob.esi.tu-berlin.de/{job}" for job in JOBS),
    ]
    assert sorted(line.split()[0] for line in applied.splitlines()) == sorted(expected), applied
