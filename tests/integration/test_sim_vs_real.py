"""The sim-vs-real benchmark's simulated half (``python -m bench.sim_vs_real --skip-real``) on KWOK nodes only: a
recorded "real" queue (a synthetic runs file) calibrates the table, the same queue runs on a simulated Testbed of the
"real" one's shape in a namespace of its own, and the comparison is printed and written.

The simulator runs every other namespace at the session's ``TIME_SCALE``; the benchmark's namespace runs at the time
scale its ConfigMap sets, so the simulated seconds, divided by it, are those of the table: runtimes within a few
tenths of a second of the calibrated ones are checked, start-up included (esi's own overhead per run is what is
left). ``recover`` profiles a given table the same way and prints it next to the one its runs give back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lightkube import Client
from lightkube.operators import exists
from lightkube.resources.core_v1 import Namespace, Node

from bench.sim_vs_real import NODE_LABEL, SIM_SPARK
from esi.results.table import RunEntry
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes, EsiApi
from tests.integration.kube import create_in
from tests.unit.run_entries import entry, runs_csv, runs_file

TIME_SCALE = 0.1
# The bench's simulated SparkPi, its driver running as an account of the namespace's own (copied with the jobs).
SPARK = SIM_SPARK | {"driver": {**SIM_SPARK["driver"], "serviceAccount": "driver"}}


def run_bench(
    command: list[str], stack: LocalCluster, esi: EsiApi, client: Client, sim_namespace: str, *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``command`` against the test's stack, as a user runs it after ``make up``; its simulated namespace deleted
    after it, its output printed."""
    env = os.environ | {"ESI_URL": esi.url, "ESI_TOKEN": esi.token, "KUBECONFIG": str(stack.kubeconfig)}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        client.delete(Namespace, sim_namespace)
    print(done.stdout)
    return done


def recorded(namespace: str) -> list[RunEntry]:
    """A queue a,b,a,b that ran as two Schedulings on the two slots of one node: a and b side by side, a for 20 s
    after a start-up of 10 s, b for 15 s after 5 s."""
    runs = [
        entry("a", 10, 30, submitted=0, met={"b": 15}, scheduling="real-1"),
        entry("b", 6, 21, submitted=1, met={"a": 11}, scheduling="real-1"),
        entry("a", 50, 70, submitted=40, met={"b": 15}, scheduling="real-2"),
        entry("b", 46, 61, submitted=41, met={"a": 11}, scheduling="real-2"),
    ]
    return [run.model_copy(update={"namespace": namespace, "testbed": "real"}) for run in runs]


def test_the_simulated_half_runs_the_recorded_queue_and_prints_the_comparison(
    esi_stack: LocalCluster,
    esi_endpoint: EsiApi,
    client: Client,
    namespace: str,
    add_nodes: AddNodes,
    unique: str,
    tmp_path: Path,
) -> None:
    label = f"esi.test/real-{unique}"
    add_nodes(1, cpu="2", memory="4Gi", labels={label: "0"})
    create_in(esi_stack, namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "driver"}})
    for job in ("a", "b"):
        batchjob = {"apiVersion": "esi.tu-berlin.de/v1alpha1", "kind": "BatchJob", "metadata": {"name": job}}
        create_in(esi_stack, namespace, batchjob | {"spec": {"sparkSpec": SPARK}})
    testbed_spec = {"nodeLabel": label, "slotsPerNode": 2, "resourcesPerSlot": {"cpu": "500m", "memory": "1Gi"}}
    testbed = {"apiVersion": "esi.tu-berlin.de/v1alpha1", "kind": "Testbed", "metadata": {"name": "real"}}
    create_in(esi_stack, namespace, testbed | {"spec": testbed_spec})
    runs = runs_file(tmp_path / "real.json", recorded(namespace))
    same_runs = runs_csv(tmp_path / "real.csv", recorded(namespace))
    sim_namespace = f"{namespace}-sim"[:63]
    out = tmp_path / "figures.json"
    command = [sys.executable, "-m", "bench.sim_vs_real", "-n", namespace, "--sim-namespace", sim_namespace]
    command += ["--from", str(runs), "--skip-real", str(same_runs), "--time-scale", str(TIME_SCALE), "--out", str(out)]
    done = run_bench(command, esi_stack, esi_endpoint, client, sim_namespace, timeout=90)

    assert done.returncode == 0, done.stderr
    assert "a,-" not in done.stdout  # never alone: no alone row
    assert "a,b,20,2,0,10" in done.stdout  # the table calibrated: runtime, samples, spread, start-up
    assert "makespan" in done.stdout
    figures = {f["name"]: f for f in json.loads(out.read_text())}
    assert set(figures) == {"makespan", "runtime a", "waiting a", "runtime b", "waiting b"}
    assert figures["makespan"]["real"] == 60  # two Schedulings of 30 s each
    assert abs(figures["runtime a"]["simulated"] - 20) < 0.5 / TIME_SCALE
    assert abs(figures["waiting a"]["simulated"] - 10) < 0.5 / TIME_SCALE
    simulated_nodes = client.list(Node, labels={f"{NODE_LABEL}/{sim_namespace}": exists()})
    assert not list(simulated_nodes), "the simulated Testbed's nodes are deleted at the end"


GIVEN = """job,colocated_with,mean_runtime_s,samples,stdev_s,mean_startup_s
a,-,30,2,,8
a,b,40,2,,10
a,c,35,2,,
b,a,30,2,,6
b,c,25,2,,6
c,a,20,2,,4
c,b,30,2,,4
"""


def test_recover_profiles_the_given_table_on_a_simulated_testbed_and_prints_given_next_to_recovered(
    esi_stack: LocalCluster, esi_endpoint: EsiApi, client: Client, namespace: str, tmp_path: Path
) -> None:
    table = tmp_path / "given.csv"
    table.write_text(GIVEN)
    sim_namespace = f"{namespace}-sim"[:63]
    command = [sys.executable, "-m", "bench.sim_vs_real", "recover", "--table", str(table), "--samples", "1"]
    command += ["--sim-namespace", sim_namespace, "--time-scale", str(TIME_SCALE)]
    done = run_bench(command, esi_stack, esi_endpoint, client, sim_namespace, timeout=120)

    assert done.returncode == 0, done.stderr
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {(row.split(",")[0], row.split(",")[1]) for row in GIVEN.splitlines()[1:]}
    assert rows["a", "-"][1] == "-"  # the profiler runs pairs only: a job alone is never measured
    for (job, neighbour), cells in rows.items():
        if neighbour != "-":  # within esi's overhead per run (a few tenths of a second) of the table's runtime
            given, found = float(cells[0].rstrip("s")), float(cells[1].rstrip("s"))
            assert abs(found - given) < 0.5 / TIME_SCALE, f"{job} next to {neighbour}: {cells}"
