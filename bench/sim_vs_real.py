"""Sim vs real: one queue of jobs on the real Testbed and on a simulated Testbed of the same shape calibrated from
earlier real runs; per-job runtime and waiting, and the makespan, side by side with the relative error.

    python -m bench.sim_vs_real [-n real] [--testbed real] [--queue a,b,c] [--repeat 2] [--time-scale 1]
        [--from runs.json] [--calibrate-since T] [--calibrate-until T] [--calibrate-selector S]
        [--real-runs real-queue.json] [--out figures.csv|figures.json]
    python -m bench.sim_vs_real --skip-real real-queue.json ...     the simulated half only, against recorded runs
    python -m bench.sim_vs_real recover --table T.csv [--samples 2] [--time-scale 0.1]

For the local stack (``ESI_URL``, ``ESI_TOKEN``, ``KUBECONFIG`` as ``make up`` exports them):

1. **Calibrate**: ``esi.results.calibration.calibrate`` of the namespace's runs on the Testbed, from the API or
   ``--from`` a file ``esi runs -o json`` (or ``-o csv``, the file ending in .csv) wrote, narrowed by
   ``--calibrate-selector`` (API only) and ``--calibrate-since``/``--calibrate-until``; the end defaults to the
   benchmark's start, so its own runs never calibrate it.
2. **Real**: the queue (default: each of the namespace's BatchJobs, by name, ``--repeat`` times) on the real
   Testbed. A Scheduling runs a job once (a name k times in its queue means k executors), so the queue is cut into
   Schedulings, one after another, a new one wherever a job comes again (a,b,a,b runs as a,b then a,b); each starts
   once the Testbed is free and is deleted when it ended. ``--real-runs`` keeps the runs (as ``esi runs -o json``).
3. **Simulated**: KWOK nodes like the real Testbed's (as many, the same allocatable CPU and memory, a label of their
   own), a Testbed on them with the same slots per node and slot size, the namespace's BatchJobs and ServiceAccounts
   copied under the same names into ``--sim-namespace``, its ConfigMap ``esi-colocation`` holding the calibrated
   table and the time scale; then the same Schedulings. ``--skip-real`` takes the real half's runs from a file
   instead (its queue from their Schedulings, unless ``--queue``). At the end its Testbed and nodes are deleted
   (``--keep`` keeps them); the namespace, its jobs, table and Runs stay.
4. **Compare**: per job the mean runtime and mean waiting (application created to run started) over the queue's
   succeeded runs of it; the makespan is the sum over the queue's Schedulings of each one's (first application
   created to last run ended, ``esi.results.metrics.summary``), so the pauses between Schedulings do not count.
   Simulated seconds are divided by the time scale. The error is (simulated - real) / real. Printed; ``--out``
   writes the figures as CSV or JSON (by the suffix). Nothing is asserted (the target: makespan within 15 %).

**The pace.** The simulated namespace runs at ``--time-scale`` (default 1: the real pace), set in its ConfigMap (a
namespace's time scale, ``sim.runtime``), whatever the simulator's ``--time-scale`` for other namespaces (the local
stack's 0.05). esi's own fraction of a second per Scheduling and run (watches, reconciles, binding) is then weighed
as in the real runs; at 0.05 it would weigh twenty times as much against the runtimes. It is the simpler of the
honest ways: the same esi processes and simulator as every other namespace, no cluster or simulator of its own.

**recover** runs the profiling example (``examples.profiling``, the profiler only) on a simulated Testbed of one node
with two slots, in ``--sim-namespace``, whose ConfigMap holds ``--table``: a BatchJob per job of the table, enough
rounds for ``--samples`` runs of each pair; then calibrates the table of those runs (``--time-scale`` divided out) and
prints per row of the given table: given, recovered (samples) and the error, runtime and start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import csv
import io
import json
import math
import os
import statistics
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import typer
from lightkube import ApiError, Client
from lightkube.codecs import from_dict
from lightkube.operators import exists
from lightkube.resources.core_v1 import ServiceAccount
from pydantic import ValidationError

from bench.waiting import wait_until
from esi.client import AsyncEsiClient, EsiClient, EsiError, NotFound, RunFilter
from esi.client.cli import RunSelection, read_runs
from esi.resources.batchjob import RunOutcome
from esi.results.calibration import TableRow, calibrate, read_table, render_table, table_configmap
from esi.results.metrics import summary
from esi.results.table import RunEntry, read_run_columns
from examples.profiling.runner import Settings, run
from infra.local_cluster.control_plane import NodeSpec, node_manifest
from kube.resources import BatchJobResource, NodeObjects, TestbedResource, plain

__all__ = [
    "Figure",
    "QueueFigures",
    "compare",
    "main",
    "queue_of_runs",
    "recovered",
    "render",
    "schedulings_of",
    "write_figures",
]

FIELD_MANAGER: Final = "esi-bench-sim-vs-real"
NODE_LABEL: Final = "sim-vs-real.esi.bench"  # /<sim namespace>: the simulated Testbed's node label
TESTBED_READY: Final = "SUCCESS"  # every slot free
FINAL_STATES: Final = ("Completed", "Failed")
# A simulated application's spec for recover: the simulator reads only the job's name (``sim.runtime``).
SIM_SPARK: Final[dict[str, Any]] = {
    "type": "Scala",
    "sparkVersion": "3.5.0",
    "image": "spark:3.5.0",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    "driver": {"cores": 1, "memory": "512m", "serviceAccount": "default"},
}


# --- the comparison (pure) ---------------------------------------------------------------------------------


def schedulings_of(queue: Sequence[str]) -> list[list[str]]:
    """The queue cut into the Schedulings that run it: a new one wherever a job comes again."""
    rounds: list[list[str]] = []
    for job in queue:
        if not rounds or job in rounds[-1]:
            rounds.append([])
        rounds[-1].append(job)
    return rounds


_DRIVER_NODE_SELECTOR: Final = "spark.kubernetes.driver.node.selector."


def simulated_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A real BatchJob's spec for the simulated Testbed: its driver (JobManager) no longer pinned to nodes by a node
    selector — pinned to the real nodes, the simulator's driver would be started there for real and fail; esi puts
    the executors into their slots whatever the spec says."""
    copied = copy.deepcopy(dict(spec))
    spark = copied.get("sparkSpec") or {}
    spark.pop("nodeSelector", None)
    (spark.get("driver") or {}).pop("nodeSelector", None)
    if "sparkConf" in spark:
        spark["sparkConf"] = {k: v for k, v in spark["sparkConf"].items() if not k.startswith(_DRIVER_NODE_SELECTOR)}
    flink = copied.get("flinkSpec") or {}
    for template in (flink.get("podTemplate"), (flink.get("jobManager") or {}).get("podTemplate")):
        ((template or {}).get("spec") or {}).pop("nodeSelector", None)
    return copied


def queue_of_runs(entries: Iterable[RunEntry]) -> list[str]:
    """The queue that ran as ``entries``: their Schedulings in order of their first application, each one's jobs in
    the order their applications were created."""
    by_scheduling: dict[str, list[RunEntry]] = defaultdict(list)
    for entry in entries:
        by_scheduling[entry.scheduling].append(entry)

    def created(entry: RunEntry) -> datetime:
        return entry.submitted or entry.started

    ordered = sorted(by_scheduling.values(), key=lambda runs: min(map(created, runs)))
    return [entry.job for runs in ordered for entry in sorted(runs, key=created)]


@dataclass(frozen=True)
class QueueFigures:
    """A queue's figures, seconds: per job the mean runtime and waiting of its succeeded runs; the makespan summed
    over its Schedulings (None without an ended run)."""

    runtime: Mapping[str, float]
    waiting: Mapping[str, float]
    makespan: float | None
    runs: int

    @classmethod
    def of(cls, entries: Sequence[RunEntry], time_scale: float = 1.0) -> QueueFigures:
        """The figures of ``entries``, their seconds divided by ``time_scale`` (a simulation's)."""
        succeeded = [e for e in entries if e.outcome is RunOutcome.SUCCEEDED]

        def means(seconds: Callable[[RunEntry], float | None]) -> dict[str, float]:
            by_job: dict[str, list[float]] = defaultdict(list)
            for entry in succeeded:
                if (value := seconds(entry)) is not None:
                    by_job[entry.job].append(value / time_scale)
            return {job: statistics.fmean(values) for job, values in sorted(by_job.items())}

        by_scheduling: dict[str, list[RunEntry]] = defaultdict(list)
        for entry in entries:
            by_scheduling[entry.scheduling].append(entry)
        makespans = [summary(runs).makespan_seconds for runs in by_scheduling.values()]
        known = [m for m in makespans if m is not None]
        return cls(
            runtime=means(lambda e: e.runtime_seconds),
            waiting=means(lambda e: e.waiting_seconds),
            makespan=sum(known) / time_scale if known else None,
            runs=len(entries),
        )


@dataclass(frozen=True)
class Figure:
    """One figure, real and simulated, seconds."""

    name: str
    real: float | None
    simulated: float | None

    @property
    def error(self) -> float | None:
        """(simulated - real) / real; None where either is missing or real is 0."""
        if self.real is None or self.simulated is None or self.real == 0:
            return None
        return (self.simulated - self.real) / self.real


def compare(real: QueueFigures, simulated: QueueFigures) -> list[Figure]:
    """The makespan, then per job (sorted) its runtime and its waiting, real next to simulated."""
    jobs = sorted({*real.runtime, *simulated.runtime, *real.waiting, *simulated.waiting})
    figures = [Figure("makespan", real.makespan, simulated.makespan)]
    for job in jobs:
        figures.append(Figure(f"runtime {job}", real.runtime.get(job), simulated.runtime.get(job)))
        figures.append(Figure(f"waiting {job}", real.waiting.get(job), simulated.waiting.get(job)))
    return figures


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def render(figures: Sequence[Figure]) -> str:
    """The figures as an aligned table: figure, real, simulated, error."""
    rows = [("FIGURE", "REAL", "SIMULATED", "ERROR")]
    rows += [(f.name, _seconds(f.real), _seconds(f.simulated), _error(f.error)) for f in figures]
    return _aligned(rows, right_from=1)


def _aligned(rows: Sequence[Sequence[str]], right_from: int) -> str:
    """Rows as columns two spaces apart; the columns from ``right_from`` on right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.rjust(w) if i >= right_from else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def write_figures(figures: Sequence[Figure], path: Path) -> None:
    """``figures`` to ``path``: JSON (a list of objects) if it ends in .json, else CSV; seconds, error a fraction."""
    records = [asdict(f) | {"error": f.error} for f in figures]
    if path.suffix == ".json":
        path.write_text(json.dumps(records, indent=2) + "\n")
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["name", "real", "simulated", "error"], lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in record.items()} for record in records)
    path.write_text(out.getvalue())


@dataclass(frozen=True)
class RecoveredRow:
    """A row of a given table and the same row as a simulation's runs recovered it (None: never measured)."""

    given: TableRow
    recovered: TableRow | None

    def error(self, value: Callable[[TableRow], float | None]) -> float | None:
        given = value(self.given)
        found = value(self.recovered) if self.recovered is not None else None
        return None if given is None or found is None or given == 0 else (found - given) / given


def recovered(given: Iterable[TableRow], found: Iterable[TableRow]) -> list[RecoveredRow]:
    """Each row of ``given`` next to the row of ``found`` for the same job and neighbour."""
    by_key = {(row.job, row.colocated_with): row for row in found}
    return [RecoveredRow(row, by_key.get((row.job, row.colocated_with))) for row in given]


def render_recovered(rows: Sequence[RecoveredRow]) -> str:
    """Per row: job, neighbour, runtime given / recovered (samples) / error, start-up given / recovered / error."""
    header = ("JOB", "NEXT TO", "RUNTIME GIVEN", "RECOVERED", "ERROR", "START-UP GIVEN", "RECOVERED", "ERROR")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        found = row.recovered
        lines.append(
            (
                row.given.job,
                row.given.colocated_with or "-",
                _seconds(row.given.mean_runtime_s),
                "-" if found is None else f"{_seconds(found.mean_runtime_s)} ({found.samples})",
                _error(row.error(lambda r: r.mean_runtime_s)),
                _seconds(row.given.mean_startup_s),
                "-" if found is None else _seconds(found.mean_startup_s),
                _error(row.error(lambda r: r.mean_startup_s)),
            )
        )
    return _aligned(lines, right_from=2)


# --- the cluster ---------------------------------------------------------------------------------------------


def _apply(kube: Client, manifest: dict[str, Any]) -> None:
    kube.apply(from_dict(manifest), field_manager=FIELD_MANAGER, force=True)


@dataclass(frozen=True)
class Shape:
    """A Testbed's shape: each node's allocatable CPU and memory, slots per node, slot size and tolerations."""

    nodes: tuple[tuple[str, str], ...]  # (cpu, memory) per node
    slots_per_node: int
    resources_per_slot: Mapping[str, Any]
    tolerations: Sequence[Mapping[str, Any]] | None

    @classmethod
    def of(cls, kube: Client, namespace: str, testbed: str) -> Shape:
        spec = plain(kube.get(TestbedResource, testbed, namespace=namespace))["spec"]
        nodes = [plain(node) for node in kube.list(NodeObjects, labels={spec["nodeLabel"]: exists()})]
        if not nodes:
            raise SystemExit(f"Testbed {namespace}/{testbed} has no nodes (label {spec['nodeLabel']})")
        sizes = tuple(
            (n["status"]["allocatable"]["cpu"], n["status"]["allocatable"]["memory"])
            for n in sorted(nodes, key=lambda n: str(n["metadata"]["labels"][spec["nodeLabel"]]))
        )
        return cls(sizes, spec["slotsPerNode"], spec["resourcesPerSlot"], spec.get("tolerations"))


def _simulated_testbed(kube: Client, esi: EsiClient, shape: Shape, namespace: str, testbed: str) -> None:
    """KWOK nodes of ``shape`` labelled for ``namespace``'s Testbed ``testbed``, and the Testbed, once Ready."""
    label = f"{NODE_LABEL}/{namespace}"
    specs = [
        NodeSpec(f"{namespace}-{i}", cpu=cpu, memory=memory, labels={label: str(i)})
        for i, (cpu, memory) in enumerate(shape.nodes)
    ]
    for spec in specs:
        _apply(kube, node_manifest(spec))

    def ready(name: str) -> bool:
        node = plain(kube.get(NodeObjects, name))
        conditions = (node.get("status") or {}).get("conditions") or []
        taints = (node.get("spec") or {}).get("taints") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in taints
        )

    wait_until("the simulated nodes Ready", lambda: all(ready(spec.name) for spec in specs), timeout=120)
    testbed_spec: dict[str, Any] = {
        "nodeLabel": label,
        "slotsPerNode": shape.slots_per_node,
        "resourcesPerSlot": dict(shape.resources_per_slot),
    }
    if shape.tolerations:
        testbed_spec["tolerations"] = list(shape.tolerations)
    _apply(
        kube,
        {
            "apiVersion": "esi.tu-berlin.de/v1alpha1",
            "kind": "Testbed",
            "metadata": {"name": testbed, "namespace": namespace},
            "spec": testbed_spec,
        },
    )
    _testbed_free(esi, testbed)


def _remove_simulated_testbed(kube: Client, namespace: str, testbed: str) -> None:
    """The simulated Testbed and its nodes deleted (the namespace, its jobs, table and Runs stay)."""
    with contextlib.suppress(ApiError):
        kube.delete(TestbedResource, testbed, namespace=namespace)
    for node in kube.list(NodeObjects, labels={f"{NODE_LABEL}/{namespace}": exists()}):
        name = node.metadata.name if node.metadata else None
        if name:
            kube.delete(NodeObjects, name)


def _namespace(kube: Client, namespace: str, table: str, time_scale: float) -> None:
    """The namespace, with its ConfigMap giving the simulator ``table`` at ``time_scale``."""
    _apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    _apply(kube, table_configmap(table, namespace, time_scale=time_scale))


def _copy_jobs(kube: Client, source: str, namespace: str) -> list[str]:
    """The BatchJobs of ``source`` (and its ServiceAccounts, which their drivers run as) under the same names in
    ``namespace``; their names."""
    for account in kube.list(ServiceAccount, namespace=source):
        name = account.metadata.name if account.metadata else None
        if name and name != "default":
            same_name = {"name": name, "namespace": namespace}
            _apply(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": same_name})
    names = []
    for job in kube.list(BatchJobResource, namespace=source):
        body = plain(job)
        metadata = body["metadata"]
        names.append(metadata["name"])
        copied = {"name": metadata["name"], "namespace": namespace, "labels": metadata.get("labels") or {}}
        spec = simulated_spec(body["spec"])
        _apply(kube, {"apiVersion": body["apiVersion"], "kind": "BatchJob", "metadata": copied, "spec": spec})
    return sorted(names)


def _simulated_jobs(kube: Client, namespace: str, jobs: Iterable[str]) -> None:
    for job in jobs:
        manifest = {
            "apiVersion": "esi.tu-berlin.de/v1alpha1",
            "kind": "BatchJob",
            "metadata": {"name": job, "namespace": namespace},
            "spec": {"sparkSpec": SIM_SPARK},
        }
        _apply(kube, manifest)


def _testbed_free(esi: EsiClient, testbed: str, timeout: float = 300) -> None:
    def free() -> bool:
        try:
            return esi.testbed(testbed).state == TESTBED_READY
        except NotFound:
            return False

    wait_until(f"Testbed {testbed} free", free, timeout)


def _run_queue(esi: EsiClient, testbed: str, queue: Sequence[str], timeout: float) -> list[RunEntry]:
    """The queue as Schedulings one after another (``schedulings_of``) on ``testbed``; the runs of them all."""
    prefix = f"sim-vs-real-{uuid.uuid4().hex[:6]}"
    names = []
    for number, jobs in enumerate(schedulings_of(queue), 1):
        name = f"{prefix}-{number}"
        _testbed_free(esi, testbed)
        print(f"  {name}: {','.join(jobs)} on {testbed} ({esi.namespace})", file=sys.stderr)
        esi.submit_queue(name, testbed, jobs)
        ended = esi.wait_for_scheduling(name, FINAL_STATES, timeout=timeout)
        if ended.esi_state != "Completed":
            reasons = "; ".join(c.message or c.reason for c in ended.conditions if c.status != "True")
            print(f"  {name} ended {ended.esi_state}: {reasons}", file=sys.stderr)
        esi.delete_scheduling(name)
        names.append(name)

    def written() -> list[RunEntry] | None:  # a Run is written once its job is let go
        runs = list(esi.runs(RunFilter(scheduling=names)))
        return runs if len(runs) >= len(queue) else None

    runs: list[RunEntry] = wait_until("the queue's Runs written", written, timeout=120)
    return runs


def _read_runs(path: Path, selection: RunSelection | None = None) -> list[RunEntry]:
    """The runs of a file ``esi runs`` wrote: ``-o csv`` if it ends in .csv, else ``-o json``."""
    try:
        if path.suffix == ".csv":
            entries = read_run_columns(path.read_text())
        else:
            entries = read_runs(path.read_text(), str(path))
    except ValidationError as err:
        raise SystemExit(f"{path} does not hold runs as `esi runs -o csv` writes them: {err}") from None
    except typer.Exit as err:
        raise SystemExit(err.exit_code) from None
    return [entry for entry in entries if selection is None or selection.selects(entry)]


def _write_runs(entries: Sequence[RunEntry], path: Path) -> None:
    path.write_text(json.dumps([e.model_dump(mode="json", by_alias=True) for e in entries], indent=1) + "\n")


# --- the command -----------------------------------------------------------------------------------------------


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 time, not {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sim_vs_real", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", choices=["compare", "recover"], default="compare", help="default: compare")
    parser.add_argument("--url", default=os.environ.get("ESI_URL", "http://127.0.0.1:8082"), help="the esi API")
    parser.add_argument("--token", default=os.environ.get("ESI_TOKEN"), help="bearer token (default: $ESI_TOKEN)")
    parser.add_argument("-n", "--namespace", default="real", help="the real jobs' namespace (default: %(default)s)")
    parser.add_argument("--testbed", default="real", help="the real Testbed (default: %(default)s)")
    parser.add_argument(
        "--sim-namespace", default="sim-vs-real", help="the simulated half's namespace (default: %(default)s)"
    )
    parser.add_argument("--queue", help="jobs in order, comma-separated (default: each BatchJob, --repeat times)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each job in the default queue (default: 2)")
    parser.add_argument(
        "--time-scale",
        type=_positive,
        help="the simulated namespace's wall-clock seconds per real second (default: 1, the real pace; 0.1 for "
        "recover)",
    )
    parser.add_argument(
        "--from", dest="source", type=Path, help="calibrate from runs `esi runs -o json` (-o csv: .csv) wrote"
    )
    parser.add_argument("--calibrate-selector", help="calibrate from runs whose labels match (API only)")
    parser.add_argument("--calibrate-since", type=_moment, help="calibrate from runs that ran at or after (ISO 8601)")
    parser.add_argument(
        "--calibrate-until", type=_moment, help="calibrate from runs that started before (default: now)"
    )
    parser.add_argument(
        "--skip-real", type=Path, metavar="RUNS", help="the real queue's runs from this file (as --from)"
    )
    parser.add_argument("--real-runs", type=Path, metavar="FILE", help="keep the real queue's runs in this file")
    parser.add_argument("--out", type=Path, help="write the figures to this file (.json or .csv)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the simulated Testbed and its nodes (default: deleted at the end)"
    )
    parser.add_argument("--table", type=Path, help="recover: the table to give the simulator (CSV)")
    parser.add_argument("--samples", type=int, default=2, help="recover: runs of each pair (default: 2)")
    parser.add_argument(
        "--timeout", type=_positive, default=3600.0, help="seconds a Scheduling may take (default: %(default)s)"
    )
    return parser.parse_args(argv)


def _calibrated(esi: EsiClient, args: argparse.Namespace, started: datetime) -> list[TableRow]:
    until = args.calibrate_until or started
    if args.source is not None:
        if args.calibrate_selector:
            raise SystemExit("runs read from a file carry no labels: --calibrate-selector needs the API")
        selection = RunSelection(testbed=args.testbed, since=args.calibrate_since, until=until)
        entries = [e for e in _read_runs(args.source, selection) if e.namespace == args.namespace]
    else:
        asked = RunFilter(
            testbed=[args.testbed], selector=args.calibrate_selector, since=args.calibrate_since, until=until
        )
        entries = list(esi.runs(asked))
    rows = calibrate(entries)
    if not rows:
        raise SystemExit(f"no succeeded runs of {args.namespace} on {args.testbed} to calibrate from")
    print(f"calibrated from {len(entries)} runs:\n{render_table(rows)}")
    return rows


def _compare(args: argparse.Namespace) -> None:
    started = datetime.now(UTC)
    time_scale = args.time_scale or 1.0
    kube = Client(field_manager=FIELD_MANAGER)
    with (
        EsiClient(args.url, token=args.token, namespace=args.namespace, timeout=30) as real,
        EsiClient(args.url, token=args.token, namespace=args.sim_namespace, timeout=30) as simulated,
    ):
        table = render_table(_calibrated(real, args, started))
        recorded = _read_runs(args.skip_real) if args.skip_real is not None else None
        jobs = sorted(real.jobs())
        if args.queue:
            queue = [job.strip() for job in args.queue.split(",") if job.strip()]
        elif recorded is not None:
            queue = queue_of_runs(recorded)
        else:
            queue = jobs * args.repeat
        if recorded is None:
            print(f"real: {','.join(queue)}", file=sys.stderr)
            recorded = _run_queue(real, args.testbed, queue, args.timeout)
            if args.real_runs is not None:
                _write_runs(recorded, args.real_runs)
        shape = Shape.of(kube, args.namespace, args.testbed)
        _namespace(kube, args.sim_namespace, table, time_scale)
        _copy_jobs(kube, args.namespace, args.sim_namespace)
        try:
            _simulated_testbed(kube, simulated, shape, args.sim_namespace, args.testbed)
            print(f"simulated (time scale {time_scale:g}): {','.join(queue)}", file=sys.stderr)
            runs = _run_queue(simulated, args.testbed, queue, args.timeout)
        finally:
            if not args.keep:
                _remove_simulated_testbed(kube, args.sim_namespace, args.testbed)
    figures = compare(QueueFigures.of(recorded), QueueFigures.of(runs, time_scale))
    print(f"{len(recorded)} real runs, {len(runs)} simulated runs (time scale {time_scale:g})")
    print(render(figures))
    if args.out is not None:
        write_figures(figures, args.out)


def _recover(args: argparse.Namespace) -> None:
    if args.table is None:
        raise SystemExit("recover needs --table: the co-location table to give the simulator")
    time_scale = args.time_scale or 0.1
    text = args.table.read_text()
    given = read_table(text, str(args.table))
    jobs = sorted({row.job for row in given} | {row.colocated_with for row in given if row.colocated_with})
    kube = Client(field_manager=FIELD_MANAGER)
    namespace, testbed = args.sim_namespace, "profiler-slots"
    started = datetime.now(UTC)
    _namespace(kube, namespace, render_table(given), time_scale)
    _simulated_jobs(kube, namespace, jobs)
    shape = Shape((("4", "8Gi"),), 2, {"cpu": "500m", "memory": "1Gi"}, None)
    rounds = args.samples * len(jobs) * (len(jobs) - 1) // 2
    settings = Settings(profiler_testbed=testbed, rounds=rounds, time_scale=time_scale, retry_delay=1)

    async def profile() -> None:
        async with AsyncEsiClient(args.url, token=args.token, namespace=namespace) as client:
            await run(client, settings, ["profiler"])

    with EsiClient(args.url, token=args.token, namespace=namespace, timeout=30) as esi:
        try:
            _simulated_testbed(kube, esi, shape, namespace, testbed)
            print(f"profiling {len(jobs)} jobs: {rounds} rounds at time scale {time_scale:g}", file=sys.stderr)
            asyncio.run(profile())
            wait_until("the profiling Schedulings gone", lambda: not esi.schedulings(), timeout=120)

            def written() -> list[RunEntry] | None:  # a Run is written once its job is let go: after the deletion
                runs = list(esi.runs(RunFilter(testbed=[testbed], since=started)))
                return runs if len(runs) >= 2 * rounds else None

            entries: list[RunEntry] = wait_until("the profiling rounds' Runs written", written, timeout=120)
        finally:
            if not args.keep:
                _remove_simulated_testbed(kube, namespace, testbed)
    found = calibrate(entries, time_scale=time_scale)
    print(f"{len(entries)} simulated runs (time scale {time_scale:g})")
    print(render_recovered(recovered(given, found)))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        _compare(args) if args.mode == "compare" else _recover(args)
    except ApiError as err:
        print(f"error: {err.status.code} {err.status.message}", file=sys.stderr)
        return 1
    except EsiError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
