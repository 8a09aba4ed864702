"""The ``esi`` command: look at Testbeds, BatchJobs and Schedulings, submit and delete Schedulings, watch live.

Everything goes through ``esi.client``: ``--url`` (``ESI_URL``) names the API, ``--token`` (``ESI_TOKEN``)
the bearer token, ``--namespace`` (``ESI_NAMESPACE``) the namespace. Tables name states as kubectl does, in
esi's words (``Ready``, ``Queued``, ``Succeeded``); ``-o json|yaml`` prints what the API returned (esi's view:
``esiState`` beside the original's ``state``) instead. Exit codes: 0 done, 1 the API refused or could not be
reached (the reason is on stderr), 2 the command line was wrong.

Tests pass a ``Connector`` as the typer context object (``CliRunner().invoke(app, args, obj=...)``) to put
an ``httpx.MockTransport`` and a fake STOMP subscriber where the network would be.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO, get_args

import httpx
import typer
import yaml
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json, to_jsonable_python
from rich.console import Console, Group, RenderableType
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from esi.client.api_client import (
    ApiStatusError,
    EsiClient,
    EsiConnectionError,
    EsiError,
    Event,
    Forbidden,
    Kind,
    NotFound,
    RunFilter,
    Subscriber,
    Unauthorized,
    topic,
)
from esi.resources.batchjob import BatchJobState, RunOutcome
from esi.resources.meta import Condition, ConditionStatus
from esi.resources.scheduling import JobState, Scheduling, SchedulingState
from esi.resources.testbed import SlotState, TestbedState
from esi.results import calibration
from esi.results.metrics import FIGURES, RunGroup, SlotKey, SlotPlace, Summary, testbed_layout
from esi.results.table import COLUMNS, RunEntry, ran_within
from esi.wire.rest import (
    ExternalBatchJob,
    ExternalScheduledEvent,
    ExternalScheduling,
    ExternalSlot,
    ExternalTestbed,
    FieldProblem,
    Overview,
    SchedulingSubmission,
    TestbedNodes,
    external_scheduling,
    field_problems,
)

__all__ = [
    "DEFAULT_URL",
    "Connector",
    "GroupBy",
    "ManifestError",
    "Output",
    "RunSelection",
    "app",
    "main",
    "read_runs",
    "scheduling_request",
    "slot_grid",
]

DEFAULT_URL = "http://127.0.0.1:8082"

# Slots without room listed under a Testbed's grid, each with why; the rest are counted.
_SHOWN_SLOTS = 10
# One colour per meaning, whichever resource the state belongs to: green settled/free, yellow waiting or
# held, cyan working, red failed or in use by an executor (slots), dim on the way out. States are esi's, as
# kubectl shows them (a slot's and a job entry's as esi.wire.rest.ESI_STATE_NAMES names them).
_STATE_COLOURS: dict[str, tuple[str, ...]] = {
    "green": (
        TestbedState.READY,
        SlotState.FREE,
        BatchJobState.READY,
        BatchJobState.SUCCEEDED,
        SchedulingState.COMPLETED,
        JobState.SUCCEEDED,
    ),
    "yellow": (
        TestbedState.PENDING,
        SlotState.RESERVED,
        BatchJobState.QUEUED,
        BatchJobState.SUBMITTED,
        SchedulingState.PENDING,
        JobState.WAITING,
        JobState.RESERVED,
        JobState.SUBMITTED,
    ),
    "cyan": (
        TestbedState.IN_USE,
        BatchJobState.SCHEDULED,
        BatchJobState.RUNNING,
        SchedulingState.RUNNING,
        JobState.RUNNING,
    ),
    "red": (TestbedState.DEGRADED, SlotState.OCCUPIED, BatchJobState.FAILED, SchedulingState.FAILED, JobState.FAILED),
    "dim": (BatchJobState.RELEASING,),
}
_STATE_STYLES = {str(state): colour for colour, states in _STATE_COLOURS.items() for state in states} | {
    "ADDED": "green",
    "MODIFIED": "cyan",
    "DELETED": "red",
}


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


@dataclass(frozen=True)
class Connector:
    """How commands reach the API: the network by default; an httpx transport and a STOMP subscriber in tests."""

    transport: httpx.BaseTransport | None = None
    subscriber: Subscriber | None = None


@dataclass(frozen=True)
class _Session:
    """What the global options chose, for one invocation."""

    url: str
    token: str | None
    namespace: str | None
    output: Output
    connector: Connector

    def client(self) -> EsiClient:
        return EsiClient(
            self.url,
            token=self.token,
            namespace=self.namespace,
            transport=self.connector.transport,
            subscriber=self.connector.subscriber,
        )


# ---------------------------------------------------------------------------------------------- the app


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


# Piped or redirected, and with no COLUMNS, a table is as wide as its rows (as kubectl prints them), not cut at 80.
UNCUT_WIDTH = 4096


def _stdout() -> Console:
    # Created per use, not at import, so it writes to whatever sys.stdout is then (CliRunner swaps it).
    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = UNCUT_WIDTH
    return console


def _fail(message: str, problems: Iterable[FieldProblem] = (), hint: str | None = None) -> typer.Exit:
    console = _stderr()
    console.print(Text(message, style="bold red"))
    for problem in problems:
        console.print(Text.assemble("  ", (problem.field, "red"), ": ", problem.problem))
    if hint:
        console.print(Text(hint, style="dim"))
    return typer.Exit(1)


def _hint(error: EsiError) -> str | None:
    if isinstance(error, EsiConnectionError):
        return "Is esi running? `make up` starts the local environment; --url or ESI_URL point elsewhere."
    if isinstance(error, Unauthorized):
        return "Pass the API's bearer token with --token or ESI_TOKEN."
    if isinstance(error, Forbidden):
        return "The token's user lacks this permission here; --namespace or ESI_NAMESPACE choose the namespace."
    return None


class _Commands(TyperGroup):
    """The command group: reports esi's errors the same way for every command."""

    def invoke(self, ctx: Any) -> Any:  # typer's Context class lives in a private module; Any accepts it
        try:
            return super().invoke(ctx)
        except ApiStatusError as err:
            raise _fail(err.message, err.errors, _hint(err)) from err
        except EsiError as err:
            raise _fail(str(err), hint=_hint(err)) from err


app = typer.Typer(
    name="esi",
    cls=_Commands,
    help="Look at esi's Testbeds, BatchJobs and Schedulings, submit Schedulings and watch them run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals would include the token
)

_NAMESPACE_HELP = "Namespace to work in (default: the server's)."
_OUTPUT_HELP = "table, or json/yaml as the API returns it."
# Every command takes -n and -o too, so they work after the command name as well as before it.
NamespaceOption = Annotated[str | None, typer.Option("--namespace", "-n", help=_NAMESPACE_HELP, show_default=False)]
OutputOption = Annotated[Output | None, typer.Option("--output", "-o", help=_OUTPUT_HELP, show_default=False)]


@app.callback()
def _options(
    ctx: typer.Context,
    url: Annotated[str, typer.Option("--url", envvar="ESI_URL", help="Base URL of the esi API.")] = DEFAULT_URL,
    token: Annotated[
        str | None, typer.Option("--token", envvar="ESI_TOKEN", help="Bearer token for the API.", show_default=False)
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", envvar="ESI_NAMESPACE", help=_NAMESPACE_HELP)
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help=_OUTPUT_HELP)] = Output.TABLE,
) -> None:
    connector = ctx.obj if isinstance(ctx.obj, Connector) else Connector()
    ctx.obj = _Session(url, token, namespace, output, connector)


def _session(ctx: typer.Context, namespace: str | None, output: Output | None) -> _Session:
    """The global choices, with what the command's own ``-n``/``-o`` override (either position works)."""
    session = ctx.find_object(_Session)
    assert session is not None  # the app's callback sets it before any command runs
    return replace(session, namespace=namespace or session.namespace, output=output or session.output)


class _YamlDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that also quotes a string a YAML 1.2 reader (kubectl, Pulumi) would take for a
    number, such as a name 1e3 or 0o17: PyYAML quotes only what YAML 1.1 reads as one."""


_YAML_12_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_YamlDumper.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_12_FLOAT, [*"-+.0123456789"])
_YamlDumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^0o[0-7]+$"), ["0"])


def _yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_YamlDumper, sort_keys=False)


def _dump(output: Output, data: Any) -> None:
    """``data`` (models, or lists and maps of them) as the API wrote it, in JSON or YAML."""
    plain = to_jsonable_python(data, by_alias=True)
    if output is Output.JSON:
        typer.echo(json.dumps(plain, indent=2))
    else:
        typer.echo(_yaml(plain), nl=False)


def _emit(session: _Session, data: Any, render: Callable[[], RenderableType]) -> None:
    """``data`` as JSON or YAML when asked for, else ``render()``'s tables."""
    if session.output is Output.TABLE:
        _stdout().print(render())
    else:
        _dump(session.output, data)


# ---------------------------------------------------------------------------------------------- rendering


def _state(state: str | None) -> Text:
    return Text(state or "-", style=_STATE_STYLES.get(state or "", ""))


def _table(*columns: str, title: str | None = None) -> Table:
    table = Table(*columns, title=title, title_justify="left", header_style="bold")
    return table


def _or_none(table: Table, what: str) -> RenderableType:
    """The table, or for a table without rows a line saying there are none (as kubectl's "No resources found")."""
    return table if table.row_count else Text(f"no {what}", style="dim")


def _or_dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _duration(start: datetime, stop: datetime | None) -> str:
    if stop is None:
        return "-"
    seconds = int((stop - start) / timedelta(seconds=1))
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


def _time(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


def _outcome(run: ExternalScheduledEvent) -> Text:
    if run.successful is True:
        return Text("succeeded", style="green")
    if run.successful is False:
        return Text("failed", style="red")
    return Text("running", style="cyan") if run.stop is None else Text("unknown", style="dim")


def _slots(testbed: ExternalTestbed) -> list[ExternalSlot]:
    return [slot for node in testbed.slots_by_node.values() for slot in node]


def _count(testbed: ExternalTestbed, state: SlotState) -> int:
    return sum(slot.esi_state == state for slot in _slots(testbed))


def _testbeds_table(testbeds: Sequence[ExternalTestbed]) -> Table:
    table = _table("NAME", "STATE", "NODES", "SLOTS/NODE", "FREE", "RESERVED", "OCCUPIED", "HELD BY")
    for t in testbeds:
        counts = [str(_count(t, state)) for state in SlotState]
        table.add_row(
            t.name,
            _state(t.esi_state),
            str(t.number_of_nodes),
            str(t.number_of_slots_per_node),
            *counts,
            _or_dash(t.held_by),
        )
    return table


def _slot_cell(slot: ExternalSlot | None) -> Text:
    if slot is None:
        return Text("")
    cell = Text.assemble((f"#{slot.position} ", "bold"), _state(slot.esi_state))
    if slot.reserved_for:
        cell.append(f"\n{slot.reserved_for}")
    if slot.pod_name:
        cell.append(f"\n{slot.pod_name}", style="dim")
    if slot.no_room:
        cell.append("\nno room", style="red")
    return cell


def slot_grid(testbed: ExternalTestbed) -> Table:
    """One column per node (by node id), one row per slot position on the node; each cell the slot id, its
    state and the job and pod in it — so the interleaved numbering (ids count across nodes first) shows."""
    nodes = sorted(
        testbed.slots_by_node.items(), key=lambda item: (min((s.node_id for s in item[1]), default=0), item[0])
    )
    table = _table("POS", title=f"slots of {testbed.name}: id, state, job, pod")
    for node, slots in nodes:
        node_id = f" (id {slots[0].node_id})" if slots else ""
        table.add_column(f"{node}{node_id}")
    positions = sorted({slot.slot_position_on_node for _, slots in nodes for slot in slots})
    for position in positions:
        cells = [
            _slot_cell(next((s for s in slots if s.slot_position_on_node == position), None)) for _, slots in nodes
        ]
        table.add_row(str(position), *cells)
    return table


def _testbed_detail(testbed: ExternalTestbed) -> RenderableType:
    head = Text.assemble(
        ("Testbed ", "bold"),
        (testbed.name, "bold"),
        f" in {testbed.namespace}: ",
        _state(testbed.esi_state),
        f", {testbed.number_of_nodes} nodes x {testbed.number_of_slots_per_node} slots",
        f", held by {testbed.held_by}" if testbed.held_by else "",
    )
    parts: list[RenderableType] = [head]
    if testbed.message:
        parts.append(Text(testbed.message, style="dim"))
    if testbed.slots_by_node:
        parts.append(slot_grid(testbed))
        crowded = sorted((s for s in _slots(testbed) if s.no_room), key=lambda s: s.position)
        parts += [Text(f"slot {s.position}: no room: {s.no_room}", style="red") for s in crowded[:_SHOWN_SLOTS]]
        if crowded[_SHOWN_SLOTS:]:
            parts.append(Text(f"and {len(crowded) - _SHOWN_SLOTS} more slots without room", style="red"))
    else:
        parts.append(Text("no slots yet: no node carries the Testbed's label, or it is still being set up"))
    return Group(*parts)


def _last_run(job: ExternalBatchJob) -> ExternalScheduledEvent | None:
    return job.scheduled_events[-1] if job.scheduled_events else None


def _jobs_table(jobs: Iterable[ExternalBatchJob]) -> Table:
    table = _table("NAME", "STATE", "RUNS", "LAST RUN", "DURATION", "SCHEDULING", "MESSAGE")
    for job in jobs:
        last = _last_run(job)
        table.add_row(
            job.name,
            _state(job.esi_state),
            str(len(job.scheduled_events)),
            _outcome(last) if last else Text("-"),
            _duration(last.start, last.stop) if last else "-",
            last.scheduling.name if last else "-",
            _or_dash(job.message),
        )
    return table


def _runs_table(job: ExternalBatchJob) -> Table:
    table = _table(
        "#",
        "ATTEMPT",
        "START",
        "END",
        "DURATION",
        "OUTCOME",
        "SCHEDULING",
        "SLOTS",
        "NODES",
        "CO-LOCATED",
        title="runs",
    )
    for number, run in enumerate(job.scheduled_events, start=1):
        table.add_row(
            str(number),
            str(run.attempt),
            _time(run.start),
            _time(run.stop),
            _duration(run.start, run.stop),
            _outcome(run),
            run.scheduling.name,
            ", ".join(map(str, run.slots)) or "-",
            ", ".join(run.nodes) or ("unknown" if run.incomplete else "-"),
            ", ".join(run.colocated_jobs) or ("unknown" if run.incomplete else "-"),
        )
    return table


def _external_scheduler_table(job: ExternalBatchJob) -> Table:
    table = _table("KEY", "#", "DATA", title="externalScheduler")
    for key, entries in (job.external_scheduler or {}).items():
        for index, entry in enumerate(entries):
            table.add_row(key, str(index), ", ".join(f"{k}: {v}" for k, v in entry.items()))
    return table


def _job_detail(job: ExternalBatchJob) -> RenderableType:
    head = Text.assemble(("BatchJob ", "bold"), (job.name, "bold"), f" in {job.namespace}: ", _state(job.esi_state))
    parts: list[RenderableType] = [head]
    if job.message:
        parts.append(Text(job.message, style="dim"))
    if job.waiting_for:
        parts.append(Text(f"waiting for: {job.waiting_for}", style="yellow"))
    parts += _warnings(job.conditions)
    parts.append(_runs_table(job) if job.scheduled_events else Text("no runs yet"))
    if job.external_scheduler:
        parts.append(_external_scheduler_table(job))
    return Group(*parts)


def _strategy(scheduling: ExternalScheduling) -> str:
    if scheduling.queue is not None:
        return f"queue of {len(scheduling.queue)}"
    assert scheduling.slots is not None  # the model holds exactly one strategy
    return f"slots {scheduling.slots.mode.lower()}, {len(scheduling.slots.jobs)} jobs"


def _progress(scheduling: ExternalScheduling) -> str:
    done = sum(entry.state == "Completed" for entry in scheduling.job_status)
    return f"{done}/{len(_planned(scheduling))}"


def _planned(scheduling: ExternalScheduling) -> dict[str, str]:
    """Each job of the spec, in order, with what it gets: its executor count (queue) or its slot ids."""
    if scheduling.queue is not None:
        return {name: f"{scheduling.queue.count(name)} executor(s)" for name in dict.fromkeys(scheduling.queue)}
    assert scheduling.slots is not None
    return {job.name: "slots " + ", ".join(map(str, job.slots)) for job in scheduling.slots.jobs}


def _schedulings_table(schedulings: Iterable[ExternalScheduling]) -> Table:
    table = _table("NAME", "STATE", "TESTBED", "STRATEGY", "DONE", "WAITING FOR")
    for s in schedulings:
        table.add_row(s.name, _state(s.esi_state), s.test_bed, _strategy(s), _progress(s), _or_dash(s.waiting_for))
    return table


def _scheduling_detail(scheduling: ExternalScheduling) -> RenderableType:
    head = Text.assemble(
        ("Scheduling ", "bold"),
        (scheduling.name, "bold"),
        f" in {scheduling.namespace}: " if scheduling.namespace else ": ",
        _state(scheduling.esi_state),
        f" on Testbed {scheduling.test_bed}, {_strategy(scheduling)}",
    )
    states = {entry.name: entry.esi_state for entry in scheduling.job_status}
    table = _table("JOB", "STATE", "GETS")
    for name, gets in _planned(scheduling).items():
        table.add_row(name, _state(states.get(name)), gets)
    parts: list[RenderableType] = [head, table]
    if scheduling.waiting_for:
        parts.append(Text(f"waiting for: {scheduling.waiting_for}", style="yellow"))
    parts += _warnings(scheduling.conditions)
    return Group(*parts)


# Conditions that are bad news when True: a wait that went on too long, a cycle of waits.
_WARNING_CONDITIONS = ("Stalled", "Deadlocked")


def _warnings(conditions: Iterable[Condition]) -> list[RenderableType]:
    return [
        Text(f"{c.type.lower()}: {c.message}", style="red")
        for c in conditions
        if c.type in _WARNING_CONDITIONS and c.status == ConditionStatus.TRUE
    ]


def _overview(view: Overview) -> RenderableType:
    in_use = sum(t.esi_state == TestbedState.IN_USE for t in view.testbeds)
    running = sum(s.esi_state not in {SchedulingState.COMPLETED, SchedulingState.FAILED} for s in view.schedulings)
    head = Text(
        f"namespace {view.namespace}: {len(view.testbeds)} Testbeds ({in_use} in use), {len(view.jobs)} BatchJobs, "
        f"{len(view.schedulings)} Schedulings ({running} unfinished)",
        style="bold",
    )
    testbeds = _table("NAME", "STATE", "NODES", "SLOTS", "FREE", "RESERVED", "OCCUPIED", "HELD BY", title="Testbeds")
    for t in view.testbeds:
        counts = (t.nodes, t.slots, t.free, t.reserved, t.occupied)
        testbeds.add_row(t.name, _state(t.esi_state), *map(str, counts), _or_dash(t.held_by))
    jobs = _table("NAME", "STATE", "HELD BY", "RUNS", "LAST RUN", title="BatchJobs")
    for j in view.jobs:
        last = {True: Text("succeeded", "green"), False: Text("failed", "red"), None: Text("-")}[j.last_run_successful]
        jobs.add_row(j.name, _state(j.esi_state), _or_dash(j.held_by), str(j.runs), last)
    schedulings = _table("NAME", "STATE", "TESTBED", "DONE", "WAITING FOR", title="Schedulings")
    for s in view.schedulings:
        schedulings.add_row(s.name, _state(s.esi_state), s.test_bed, _or_dash(s.progress), _or_dash(s.waiting_for))
    return Group(
        head, _or_none(testbeds, "Testbeds"), _or_none(jobs, "BatchJobs"), _or_none(schedulings, "Schedulings")
    )


# ---------------------------------------------------------------------------------------------- commands


@app.command()
def overview(ctx: typer.Context, namespace: NamespaceOption = None, output: OutputOption = None) -> None:
    """Counts and tables of the namespace's Testbeds, BatchJobs and Schedulings."""
    session = _session(ctx, namespace, output)
    with session.client() as client:
        view = client.overview()
    _emit(session, view, lambda: _overview(view))


@app.command("testbeds")
def show_testbeds(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Show this Testbed's slot grid.", show_default=False)] = None,
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """List Testbeds; with NAME, its slots: a column per node, a row per slot position, each slot's id and state."""
    session = _session(ctx, namespace, output)
    with session.client() as client:
        if name is None:
            found = client.testbeds()
            _emit(session, found, lambda: _or_none(_testbeds_table(found), "Testbeds"))
        else:
            one = client.testbed(name)
            _emit(session, one, lambda: _testbed_detail(one))


@app.command("jobs")
def show_jobs(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Show this BatchJob's runs.", show_default=False)] = None,
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """List BatchJobs; with NAME, its run history (slots, nodes, co-located jobs) and externalScheduler data."""
    session = _session(ctx, namespace, output)
    with session.client() as client:
        if name is None:
            found = client.jobs()
            _emit(session, found, lambda: _or_none(_jobs_table(found[key] for key in sorted(found)), "BatchJobs"))
        else:
            one = client.job(name)
            _emit(session, one, lambda: _job_detail(one))


@app.command("schedulings")
def show_schedulings(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Show this Scheduling's jobs.", show_default=False)] = None,
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """List Schedulings; with NAME, the state of each of its jobs and what it waits for."""
    session = _session(ctx, namespace, output)
    with session.client() as client:
        if name is None:
            found = client.schedulings()
            _emit(session, found, lambda: _or_none(_schedulings_table(found), "Schedulings"))
        else:
            one = client.scheduling(name)
            _emit(session, one, lambda: _scheduling_detail(one))


def _testbed_nodes(answer: TestbedNodes) -> RenderableType:
    verb = "would be" if answer.dry_run else "are"
    head = Text(
        f"Testbed {answer.testbed}'s nodes {verb} ({answer.node_label}):"
        + (" a dry run, no node is labelled" if answer.dry_run else ""),
        style="bold",
    )
    table = _table("NODE", "ID", "FREE CPU", "FREE MEMORY", "ROOM (SLOTS)", "LABEL")
    for node in answer.nodes:
        label = Text("set" if node.labelled else "kept", style="green" if node.labelled else "dim")
        table.add_row(node.name, str(node.node_id), node.free_cpu, node.free_memory, str(node.room), label)
    parts: list[RenderableType] = [head, table]
    if answer.unlabelled:
        parts.append(Text(f"label {'to be ' if answer.dry_run else ''}removed from: {', '.join(answer.unlabelled)}"))
    return Group(*parts)


@app.command("label-nodes")
def label_nodes(  # noqa: PLR0917 (typer passes what the command declares)
    ctx: typer.Context,
    testbed: Annotated[str, typer.Argument(help="The Testbed to set up.")],
    count: Annotated[int, typer.Option("--count", "-c", min=1, help="How many nodes it is to have.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the choice; label no node.")] = False,
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """Set a Testbed up on the COUNT nodes with the most room: label them, and only them.

    A node fits when it is Ready, not cordoned, has no NoSchedule/NoExecute taint the
    Testbed does not tolerate, carries no other Testbed's node label, and its pods (the
    Testbed's own not counted) leave room for slotsPerNode slots. The most room (in slots)
    comes first, ties by name. Nodes with the label keep their id, new ones get the smallest
    free ids, the Testbed's other nodes lose the label. Refused, changing nothing, when fewer
    fit (saying what each node lacks) or when a node that would lose the label holds a
    Reserved or Occupied slot. Needs patch on nodes.
    """
    session = _session(ctx, namespace, output)
    with session.client() as client:
        answer = client.label_nodes(testbed, count, dry_run=dry_run)
    _emit(session, answer, lambda: _testbed_nodes(answer))


class ManifestError(ValueError):
    """A document that is not a Scheduling in either shape; ``problems`` says where."""

    def __init__(self, message: str, problems: Sequence[FieldProblem] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.problems = list(problems)


def scheduling_request(document: object) -> SchedulingSubmission | ExternalScheduling:
    """The API request for one document: an esi ``Scheduling`` manifest, or the original's ExternalScheduling."""
    if not isinstance(document, dict):
        raise ManifestError(f"expected a mapping, got {type(document).__name__}")
    try:
        if "apiVersion" not in document and "kind" not in document:
            return SchedulingSubmission.model_validate(document)
        if document.get("kind") != "Scheduling":
            raise ManifestError(f"esi submit takes Schedulings, not {document.get('kind')!r}")
        manifest = Scheduling.model_validate(document)
    except ValidationError as err:
        name = document.get("metadata", {}).get("name") if isinstance(document.get("metadata"), dict) else None
        name = name or document.get("name")
        raise ManifestError(
            f"not a valid Scheduling{f' ({name})' if name else ''}", field_problems(err, whole="(document)")
        ) from err
    return external_scheduling(manifest.model_copy(update={"status": None}))


def _documents(source: TextIO) -> list[Any]:
    try:
        documents = [doc for doc in yaml.safe_load_all(source) if doc is not None]
    except yaml.YAMLError as err:
        raise ManifestError(f"{source.name} is neither YAML nor JSON: {err}") from err
    if not documents:
        raise ManifestError(f"{source.name} holds no document")
    return documents


@app.command()
def submit(
    ctx: typer.Context,
    file: Annotated[typer.FileText, typer.Argument(help="YAML or JSON file; - reads standard input.")],
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """Create or replace Schedulings from FILE: esi Scheduling manifests or the original's ExternalScheduling.

    Every document is checked before any is sent; a Scheduling that exists gets the new queue or slots
    (jobs already started run on).
    """
    session = _session(ctx, namespace, output)
    try:
        documents = _documents(file)
        requests = [scheduling_request(doc) for doc in documents]
    except ManifestError as err:
        raise _fail(err.message, err.problems) from err
    for document in documents:
        if isinstance(document.get("spec"), dict) and "retry" in document["spec"]:
            _stderr().print(
                Text(f"{file.name}: spec.retry is not part of the REST API and is not sent", style="yellow")
            )
    results = []
    with session.client() as client:
        for request in requests:
            try:
                submitted = client.submit(request)
            except ValueError as err:  # the manifest's namespace and --namespace disagree
                raise _fail(str(err)) from err
            results.append(submitted.scheduling)
            if session.output is Output.TABLE:
                verb = "created" if submitted.created else "replaced (jobs already started run on)"
                _stdout().print(Text(f"Scheduling {request.name} {verb}", style="green"))
                _stdout().print(_scheduling_detail(submitted.scheduling))
    if session.output is not Output.TABLE:
        _dump(session.output, results[0] if len(results) == 1 else results)


@app.command()
def delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The Scheduling to delete.")],
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """Delete a Scheduling; its Testbed and jobs are released (running jobs are stopped)."""
    session = _session(ctx, namespace, output)
    with session.client() as client:
        gone = client.delete_scheduling(name)
    _emit(session, gone, lambda: Text(f"Scheduling {name} deleted; it was {gone.esi_state}", style="green"))


_EXTERNAL_SCHEDULER = TypeAdapter(dict[str, list[dict[str, str]]])


@app.command("set-external-scheduler")
def set_external_scheduler(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The BatchJob.")],
    file: Annotated[
        typer.FileText, typer.Argument(help="YAML or JSON: {key: [{field: value}, ...]}; - reads standard input.")
    ],
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """Replace a BatchJob's externalScheduler data (the scheduler's own notes, e.g. profiling results)."""
    session = _session(ctx, namespace, output)
    try:
        documents = _documents(file)
        data = _EXTERNAL_SCHEDULER.validate_python(documents[0] if len(documents) == 1 else documents)
    except ManifestError as err:
        raise _fail(err.message, err.problems) from err
    except ValidationError as err:
        raise _fail(f"{file.name} is not externalScheduler data", field_problems(err, whole="(document)")) from err
    with session.client() as client:
        updated = client.set_external_scheduler(job, data)
    _emit(session, updated, lambda: _external_scheduler_table(updated))


def _summary(event: Event[Any]) -> Text:
    resource = event.resource
    if isinstance(resource, ExternalTestbed):
        counts = ", ".join(f"{_count(resource, s)} {s.lower()}" for s in SlotState)
        held = f", held by {resource.held_by}" if resource.held_by else ""
        return Text.assemble(_state(resource.esi_state), f" {counts}{held}")
    if isinstance(resource, ExternalBatchJob):
        waiting = f", waiting for {resource.waiting_for}" if resource.waiting_for else ""
        return Text.assemble(_state(resource.esi_state), f" {len(resource.scheduled_events)} runs{waiting}")
    if isinstance(resource, ExternalScheduling):
        waiting = f", waiting for {resource.waiting_for}" if resource.waiting_for else ""
        return Text.assemble(_state(resource.esi_state), f" {_progress(resource)} done{waiting}")
    return Text("")


def _event_line(event: Event[Any], now: datetime) -> Text:
    return Text.assemble(
        f"{now:%H:%M:%S} ",
        (f"{event.action:<8}", _STATE_STYLES.get(event.action, "")),
        f" {event.kind.removesuffix('s')}/{event.name} ",
        _summary(event),
    )


def _with_view(client: EsiClient, event: Event[Any]) -> Event[Any]:
    """The event with its object's view: a per-kind topic names the object only, so it is read, and the line
    shows its state as a per-object topic's does (no view for a deletion, or for an object gone meanwhile)."""
    if event.resource is not None or event.action not in ("ADDED", "MODIFIED"):
        return event
    read = {"testbeds": client.testbed, "jobs": client.job, "schedulings": client.scheduling}[event.kind]
    try:
        return replace(event, resource=read(event.name))
    except NotFound:
        return event


def _destinations(kind: Kind | None, name: str | None) -> list[str]:
    if kind is None:
        return [topic(k) for k in get_args(Kind)]
    return [topic(kind, name)]


@app.command()
def watch(
    ctx: typer.Context,
    kind: Annotated[
        Kind | None, typer.Argument(help="testbeds, jobs or schedulings (default: all three).", show_default=False)
    ] = None,
    name: Annotated[str | None, typer.Argument(help="Only this object.", show_default=False)] = None,
    namespace: NamespaceOption = None,
    output: OutputOption = None,
) -> None:
    """Print each change as it happens (over STOMP), one line per event with the object's state (as read when
    the event arrives); Ctrl-C stops.

    With -o json, one JSON object per line, as the topic carries it: destination, action, name and the object's
    view (null on a per-kind topic, which names the object only).
    """
    session = _session(ctx, namespace, output)
    try:
        with session.client() as client, client.subscribe(*_destinations(kind, name)) as events:
            for event in events:
                if session.output is Output.TABLE:
                    _stdout().print(_event_line(_with_view(client, event), datetime.now().astimezone()))
                    continue
                record = {"destination": event.destination, "action": event.action, "name": event.name}
                record["resource"] = to_jsonable_python(event.resource, by_alias=True)
                # YAML: each event one item of a sequence that grows as events come
                text = json.dumps(record) + "\n" if session.output is Output.JSON else _yaml([record])
                typer.echo(text, nl=False)
    except KeyboardInterrupt:
        return  # Ctrl-C is how a watch ends
    raise _fail(f"the esi API at {session.url} closed the STOMP connection")


# ---------------------------------------------------------------------------------------------- runs


class RunsOutput(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    PARQUET = "parquet"


ANALYSIS_EXTRA = "pip install 'esi[analysis]'"
_RUNS_HELP = """Every finished run of the namespace as a table: job, kind, ordinal, attempt, Scheduling, Testbed,
slots, nodes, the jobs it met on its nodes with the seconds they overlapped, submitted, started, ended, waiting
and runtime seconds, outcome, reason — one row per Run, in order of start (every column is explained in
docs/how-to/runs-as-data.md).

-o table (the default) shows the main columns; -o csv writes a header and a line per run (lists joined by ";",
a co-located job as job=seconds); -o json a JSON array, one run per line (RunEntry's fields, camelCase);
-o parquet a Parquet file (--output-file; needs pyarrow: pip install 'esi\\[analysis]'): times as
timestamp\\[us, UTC], seconds as float64, slots and nodes as lists, colocated as a list of {job, seconds}.

Filters of different kinds must all hold; a repeated filter takes any of its values."""


def _met(colocated: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['job']} {_seconds(c['seconds']) if c['seconds'] is not None else '?'}" for c in colocated)


def _run_rows_table(records: Iterable[dict[str, Any]]) -> Table:
    table = _table(
        "JOB", "#", "ATTEMPT", "SCHEDULING", "TESTBED", "NODES", "STARTED", "WAITING", "RUNTIME", "OUTCOME", "MET"
    )
    for r in records:
        started = datetime.fromisoformat(r["started"])
        table.add_row(
            r["job"],
            str(r["ordinal"]),
            str(r["attempt"]),
            r["scheduling"],
            r["testbed"],
            ", ".join(r["nodes"]) or "-",
            _time(started),
            _seconds(r["waitingSeconds"]),
            _seconds(r["runtimeSeconds"]),
            _state(r["outcome"]),
            _met(r["colocated"]) or "-",
        )
    return table


@contextlib.contextmanager
def _export_progress() -> Iterator[Callable[[int], None]]:
    """``advance(rows)`` after each page: a line on stderr counting pages and runs while it is a terminal."""
    console = _stderr()
    if not console.is_terminal:
        yield lambda _: None
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console, transient=True) as progress:
        task = progress.add_task("runs: 0 (0 pages)")
        counts = [0, 0]

        def advance(rows: int) -> None:
            counts[0] += rows
            counts[1] += 1
            progress.update(task, description=f"runs: {counts[0]:,} ({counts[1]} pages)")

        yield advance


def _parquet(pages: Iterable[list[dict[str, Any]]], path: Path) -> int:
    """The runs into a Parquet file at ``path``; how many there were."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # noqa: PLC0415 (the analysis extra, only for this)
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError as err:
        raise _fail(f"-o parquet needs pyarrow: {ANALYSIS_EXTRA}") from err
    moments = ("submitted", "started", "ended")
    types: dict[str, Any] = {
        "ordinal": pa.int64(),
        "attempt": pa.int64(),
        "slots": pa.list_(pa.int64()),
        "nodes": pa.list_(pa.string()),
        "colocated": pa.list_(pa.struct([("job", pa.string()), ("seconds", pa.float64())])),
        "waitingSeconds": pa.float64(),
        "runtimeSeconds": pa.float64(),
    }
    read = pa.schema([(c, types.get(c, pa.string())) for c in COLUMNS])
    written = pa.schema([(c, pa.timestamp("us", "UTC") if c in moments else read.field(c).type) for c in COLUMNS])
    count = 0
    with pq.ParquetWriter(path, written) as writer:
        for records in pages:
            table = pa.Table.from_pylist(records, schema=read)
            writer.write_table(table.cast(written))
            count += len(records)
    return count


@app.command("runs", help=_RUNS_HELP)
def show_runs(  # noqa: PLR0917 (typer passes what the command declares)
    ctx: typer.Context,
    job: Annotated[list[str] | None, typer.Option("--job", "-j", help="Runs of this BatchJob.")] = None,
    scheduling: Annotated[list[str] | None, typer.Option("--scheduling", help="Runs in this Scheduling.")] = None,
    testbed: Annotated[list[str] | None, typer.Option("--testbed", help="Runs on this Testbed.")] = None,
    outcome: Annotated[
        list[RunOutcome] | None, typer.Option("--outcome", help="Runs that ended so.", case_sensitive=False)
    ] = None,
    selector: Annotated[
        str | None,
        typer.Option("--selector", "-l", help="Label selector, as kubectl -l: key=value,key!=value,key,!key."),
    ] = None,
    since: Annotated[str | None, typer.Option(help="Runs that ended at or after this moment (ISO 8601).")] = None,
    until: Annotated[str | None, typer.Option(help="Runs that started before this moment (ISO 8601).")] = None,
    output_file: Annotated[
        Path | None, typer.Option("--output-file", help="Write csv, json or parquet here instead of stdout.")
    ] = None,
    namespace: NamespaceOption = None,
    output: Annotated[
        RunsOutput | None, typer.Option("--output", "-o", help="table, csv, json or parquet.", show_default=False)
    ] = None,
) -> None:
    session = _session(ctx, namespace, None)
    chosen = output or {Output.TABLE: RunsOutput.TABLE, Output.JSON: RunsOutput.JSON}.get(session.output)
    if chosen is None:
        raise _fail("esi runs writes -o table, csv, json or parquet")
    if chosen is RunsOutput.PARQUET and output_file is None:
        raise _fail("-o parquet writes a file: name it with --output-file")
    if chosen is RunsOutput.TABLE and output_file is not None:
        raise _fail("--output-file takes csv, json or parquet (-o)")
    runs = RunFilter(
        job=job or (),
        scheduling=scheduling or (),
        testbed=testbed or (),
        outcome=outcome or (),
        selector=selector,
        since=_moment(since, "--since"),
        until=_moment(until, "--until"),
    )
    with session.client() as client, _export_progress() as advance:
        if chosen is RunsOutput.PARQUET:
            assert output_file is not None

            def pages() -> Iterator[list[dict[str, Any]]]:
                for records in client.run_records(runs):
                    advance(len(records))
                    yield records

            count = _parquet(pages(), output_file)
            _stderr().print(Text(f"{count:,} runs written to {output_file}", style="green"))
        elif chosen is RunsOutput.TABLE:
            records = [r for page in client.run_records(runs) for r in page]
            # A run becomes a Run once its Scheduling lets the job go (docs/design.md#runs), not when it ends.
            kept_when = "a run is listed once its Scheduling lets the job go: delete a finished one to list its runs"
            _stdout().print(_or_none(_run_rows_table(records), f"runs ({kept_when})"))
        else:
            with _binary_output(output_file) as out:
                if chosen is RunsOutput.CSV:
                    for text in client.runs_csv(runs):
                        out.write(text)
                        advance(text.count(b"\n"))
                else:
                    _json_lines_array(client.run_records(runs), out, advance)


@contextlib.contextmanager
def _binary_output(path: Path | None) -> Iterator[BinaryIO]:
    if path is None:
        yield typer.get_binary_stream("stdout")
        return
    with path.open("wb") as file:
        yield file


def _json_lines_array(pages: Iterable[list[dict[str, Any]]], out: BinaryIO, advance: Callable[[int], None]) -> None:
    """A JSON array, one run a line, written page by page."""
    out.write(b"[")
    separator = b"\n"
    for records in pages:
        for record in records:
            out.write(separator + to_json(record))
            separator = b",\n"
        advance(len(records))
    out.write(b"\n]\n")


# ---------------------------------------------------------------------------------------------- report


class GroupBy(StrEnum):
    SCHEDULING = "scheduling"
    TESTBED = "testbed"


# Paragraphs of one line each: the terminal wraps them to its width.
_REPORT_HELP = "\n\n".join(
    (
        "Write an experiment's report into --out: report.html, one self-contained page (the summary, the figures, the"
        " co-location tables), and each figure as SVG and PDF for a paper:",
        *(f"{name}: {heading.lower()}. {caption}" for name, (heading, caption) in FIGURES.items()),
        "summary.csv, summary.json: makespan, waiting (mean, 95th percentile), slot utilisation, failed, cancelled "
        "and retried runs.",
        "Runs are those of the SCHEDULINGs named (default: all), narrowed by --selector, --testbed, --since and "
        "--until; --from reads them from files `esi runs -o json` wrote instead of the API. Groups side by side (a "
        "column each, on the same scales): --compare SELECTOR once per group, --by scheduling (or testbed), or "
        "several --from files.",
        "A run is beside a job when they shared a node for any time, alone when it shared none; runtimes are of "
        "succeeded runs. Slot utilisation is over the Testbeds' slots (with --from: the slots the runs used). Needs "
        "the analysis extra: pip install 'esi\\[analysis]'.",
    )
)


def _moment(text: str | None, option: str) -> datetime | None:
    """An ISO 8601 moment from the command line; without an offset, UTC."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as err:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time", param_hint=option) from err
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def read_runs(text: str, source: str) -> list[RunEntry]:
    """Runs as ``esi runs -o json`` writes them: a JSON array of ``RunEntry``, or one per line."""
    try:
        stripped = text.lstrip()
        if stripped.startswith("["):
            return _RUN_ENTRIES.validate_json(text)
        return [RunEntry.model_validate_json(line) for line in text.splitlines() if line.strip()]
    except ValidationError as err:
        raise _fail(f"{source} does not hold runs as `esi runs -o json` writes them", field_problems(err)) from err


_RUN_ENTRIES = TypeAdapter(list[RunEntry])


@dataclass(frozen=True)
class RunSelection:
    """Which runs a report is about (every filter given must hold)."""

    schedulings: frozenset[str] = frozenset()
    testbed: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def of(
        cls, schedulings: Sequence[str] | None, testbed: str | None, since: str | None, until: str | None
    ) -> RunSelection:
        """The selection the command line's run selection options (``SchedulingsArgument`` ...) make."""
        return cls(frozenset(schedulings or ()), testbed, _moment(since, "--since"), _moment(until, "--until"))

    def selects(self, entry: RunEntry) -> bool:
        """As the API selects (``ran_within``: a run is in [since, until) when it ran at some moment of it)."""
        start = entry.started.timestamp()
        end = entry.ended.timestamp() if entry.ended is not None else start
        return (
            (not self.schedulings or entry.scheduling in self.schedulings)
            and (self.testbed is None or entry.testbed == self.testbed)
            and ran_within(start, max(end, start), self.since, self.until)
        )


def _api_runs(client: EsiClient, selection: RunSelection, selector: str | None) -> list[RunEntry]:
    """The runs ``selection`` and ``selector`` select, from the API's run table (GET /external/runs)."""
    asked = RunFilter(
        scheduling=sorted(selection.schedulings),
        testbed=[selection.testbed] if selection.testbed is not None else [],
        selector=selector,
        since=selection.since,
        until=selection.until,
    )
    return list(client.runs(asked))


def _file_runs(source: Path, selection: RunSelection) -> list[RunEntry]:
    """The runs ``selection`` selects among those of a file ``esi runs -o json`` wrote."""
    return [entry for entry in read_runs(source.read_text(), str(source)) if selection.selects(entry)]


def _table_file(source: Path) -> list[calibration.TableRow]:
    """The rows of the co-location table in ``source``; a table that cannot be read fails the command, saying why."""
    try:
        return calibration.read_table(source.read_text(), str(source))
    except OSError as err:
        raise typer.BadParameter(f"cannot read {source}: {err.strerror}", param_hint="--reference") from err
    except calibration.TableError as err:
        raise typer.BadParameter(str(err), param_hint="--reference") from err


# How the commands that read runs (report, calibrate) select them; RunSelection.of makes the selection.
SchedulingsArgument = Annotated[
    list[str] | None, typer.Argument(help="Runs of these Schedulings (default: all).", show_default=False)
]
SelectorOption = Annotated[
    str | None, typer.Option("--selector", "-l", help="Runs whose labels match, as kubectl -l.", show_default=False)
]
TestbedOption = Annotated[str | None, typer.Option("--testbed", help="Runs on this Testbed.", show_default=False)]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="Runs that ran at or after (ISO 8601; UTC if no offset).")
]
UntilOption = Annotated[str | None, typer.Option("--until", help="Runs that started before (ISO 8601).")]


def _layout(client: EsiClient, entries: Iterable[RunEntry]) -> dict[SlotKey, SlotPlace]:
    """Where the slots of the runs' Testbeds are, as the Testbeds say; a Testbed gone since is left out."""
    layout: dict[SlotKey, SlotPlace] = {}
    for name in sorted({entry.testbed for entry in entries}):
        try:
            layout |= testbed_layout(client.testbed(name))
        except NotFound:
            continue
    return layout


def _split(entries: Sequence[RunEntry], by: GroupBy) -> dict[str, list[RunEntry]]:
    groups: dict[str, list[RunEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.scheduling if by is GroupBy.SCHEDULING else entry.testbed, []).append(entry)
    return dict(sorted(groups.items()))


def _joined(*selectors: str | None) -> str | None:
    return ",".join(s for s in selectors if s) or None


@app.command(help=_REPORT_HELP)
def report(
    ctx: typer.Context,
    *,
    schedulings: SchedulingsArgument = None,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the report into.")] = Path("report"),
    selector: SelectorOption = None,
    testbed: TestbedOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    compare: Annotated[
        list[str] | None,
        typer.Option("--compare", help="A group of runs by label selector; repeat to set groups side by side."),
    ] = None,
    by: Annotated[
        GroupBy | None,
        typer.Option("--by", help="A group per Scheduling or Testbed, side by side.", show_default=False),
    ] = None,
    sources: Annotated[
        list[Path] | None,
        typer.Option("--from", help="Runs from this file (`esi runs -o json`), not the API; repeat: a group each."),
    ] = None,
    references: Annotated[
        list[Path] | None,
        typer.Option(
            "--reference",
            help="A co-location table (CSV as `esi calibrate` writes it, e.g. sim/data/colocation-thesis.csv) "
            "drawn beside the runs in the slowdown and co-location figures; repeatable.",
        ),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="The report's title.")] = "An experiment's runs",
    namespace: NamespaceOption = None,
) -> None:
    reference_tables = {path.stem: calibration.table_runtimes(_table_file(path)) for path in references or []}
    try:
        from esi.results.report import build_report  # noqa: PLC0415 (the analysis extra, only for this command)
    except ModuleNotFoundError as err:
        raise _fail(
            f"esi report draws with {err.name}, which is not installed", hint="pip install 'esi[analysis]'"
        ) from err
    if sum([bool(compare), by is not None, len(sources or []) > 1]) > 1:
        raise typer.BadParameter("choose one way to group: --compare, --by, or several --from files")
    selection = RunSelection.of(schedulings, testbed, since, until)
    session = _session(ctx, namespace, None)
    groups: dict[str, list[RunEntry]] = {}
    layout: dict[SlotKey, SlotPlace] | None = None
    if sources:
        if selector or compare:
            raise typer.BadParameter("runs read from a file carry no labels: --selector and --compare need the API")
        for source in sources:
            groups[source.stem] = _file_runs(source, selection)
    else:
        with session.client() as client:
            selectors: list[str | None] = [*(compare or [])] or [None]
            for group_selector in selectors:
                chosen = _joined(selector, group_selector)
                groups[group_selector or chosen or "all runs"] = _api_runs(client, selection, chosen)
            layout = _layout(client, (entry for entries in groups.values() for entry in entries))
    if by is not None:
        groups = _split([entry for entries in groups.values() for entry in entries], by)
    if not any(groups.values()):
        raise _fail("no runs selected", hint="`esi runs` lists the runs there are.")
    run_groups = [RunGroup(name, entries, layout) for name, entries in groups.items()]
    written = build_report(run_groups, title, datetime.now(UTC), reference_tables)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in written.files.items():
        (out / name).write_bytes(content)
    typer.echo(f"wrote {', '.join(sorted(written.files))} to {out}")
    _stdout().print(_headline(written.summaries))


def _headline(summaries: Mapping[str, Summary]) -> Table:
    table = _table("GROUP", "RUNS", "MAKESPAN", "WAITING MEAN", "WAITING P95", "UTILISATION", "FAILED", "RETRIED")
    for name, s in summaries.items():
        table.add_row(
            name,
            str(s.runs),
            _seconds(s.makespan_seconds),
            _seconds(s.waiting_mean_seconds),
            _seconds(s.waiting_p95_seconds),
            "-" if s.utilisation is None else f"{s.utilisation:.1%}",
            str(s.failed),
            str(s.retried),
        )
    return table


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}s"


# ---------------------------------------------------------------------------------------------- calibrate


class TableOutput(StrEnum):
    CSV = "csv"
    CONFIGMAP = "configmap"


_CALIBRATE_HELP = "\n\n".join(
    (
        "Write the simulator's co-location table measured by recorded runs: per job its runtime alone and next to "
        "each job it met, each with its mean, standard deviation and samples, and the mean start-up (application "
        "created to executors running) of those runs (CSV job,colocated_with,mean_runtime_s,samples,stdev_s,"
        "mean_startup_s; colocated_with - for a job alone).",
        "Runs are those of the SCHEDULINGs named (default: all), narrowed by --selector, --testbed, --since and "
        "--until; --from reads them from files `esi runs -o json` wrote instead of the API (repeat: all of them). "
        "Only succeeded runs count; a run is next to every job it shared a node with, alone when it shared none.",
        "-o csv (the default) writes the table; -o configmap the ConfigMap that gives it to the simulator for the "
        "jobs of --namespace (for kubectl apply -f -, or to keep in Git). To a file with --out, else stdout.",
    )
)


@app.command(help=_CALIBRATE_HELP)
def calibrate(
    ctx: typer.Context,
    *,
    schedulings: SchedulingsArgument = None,
    selector: SelectorOption = None,
    testbed: TestbedOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    sources: Annotated[
        list[Path] | None, typer.Option("--from", help="Runs from this file (`esi runs -o json`), not the API.")
    ] = None,
    output: Annotated[TableOutput, typer.Option("--output", "-o", help="csv, or configmap.")] = TableOutput.CSV,
    out: Annotated[
        Path | None, typer.Option("--out", help="File to write the table to (default: stdout).", show_default=False)
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help="The simulator's --time-scale the runs ran at (1: real runs); their seconds are divided by it.",
        ),
    ] = 1.0,
    namespace: NamespaceOption = None,
) -> None:
    if not (time_scale > 0):
        raise typer.BadParameter("a positive factor, e.g. 0.05", param_hint="--time-scale")
    selection = RunSelection.of(schedulings, testbed, since, until)
    session = _session(ctx, namespace, None)
    if output is TableOutput.CONFIGMAP and session.namespace is None:
        raise typer.BadParameter("the ConfigMap gives the table to one namespace's jobs: name it", param_hint="-n")
    if sources:
        if selector:
            raise typer.BadParameter("runs read from a file carry no labels: --selector needs the API")
        entries = [entry for source in sources for entry in _file_runs(source, selection)]
    else:
        with session.client() as client:
            entries = _api_runs(client, selection, selector)
    rows = calibration.calibrate(entries, time_scale=time_scale)
    if not rows:
        raise _fail("no succeeded runs selected", hint="`esi runs` lists the runs there are.")
    table = calibration.render_table(rows)
    if output is TableOutput.CONFIGMAP:
        assert session.namespace is not None  # checked before any run was read
        table = _yaml(calibration.table_configmap(table, session.namespace))
    if out is None:
        typer.echo(table, nl=False)
    else:
        out.write_text(table)
        _stderr().print(f"wrote the co-location table of {len(entries)} runs ({len(rows)} rows) to {out}")


def main() -> None:
    """The ``esi`` console script."""
    app(prog_name="esi")


if __name__ == "__main__":
    main()
