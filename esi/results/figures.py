"""The figures of an experiment, drawn with matplotlib (the ``analysis`` extra): one module, the only one that
imports it.

* ``gantt``: slot occupancy over time, a row per slot grouped by node, a bar per run and slot coloured by job;
  failed runs hatched with a red edge, cancelled ones dotted with a grey edge.
* ``slowdown``: a panel per job, a bar for its runtime alone and one beside each neighbour (mean, ± one standard
  deviation), labelled with the slowdown and the number of runs.
* ``colocation``: the co-location matrix (the thesis' table) as a heatmap: a row per job, a column for its runtime
  alone and one per neighbour, each cell its mean runtime and, in brackets, its runs; coloured by the runtime
  relative to the job's runtime alone.

Several groups (e.g. one per Scheduling) are drawn side by side in one figure, on the same scales where they
compare: one time axis for the Gantt charts, one runtime axis per job, one colour scale for the heatmaps.
Artists carry ids (``set_gid``) that name the group, job and neighbour, so the SVG can be read back.
``render`` writes a figure as SVG and PDF, the same bytes for the same figure (hash salt fixed, no dates).
Drawing is on ``matplotlib.figure.Figure`` directly: no pyplot, no display, no global backend.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import matplotlib
from matplotlib.collections import PolyCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from esi.resources.batchjob import RunOutcome
from esi.results.metrics import (
    JobRuntimes,
    RunGroup,
    RuntimeStats,
    SlotLayout,
    colocation_matrix,
    slot_layout,
)
from esi.results.table import RunEntry

__all__ = ["ALONE", "Rendered", "colocation", "gantt", "gid", "render", "slowdown"]

ALONE: Final = "alone"
WIDTH: Final = 7.0  # inches: a page's text width, so fonts print at their size
# A Gantt panel of more bars draws them as an image inside the vector figure (axes and text stay vector): as
# paths they would make a file of megabytes that viewers draw slowly, with no detail a page can show.
VECTOR_BARS: Final = 20_000
RASTER_DPI: Final = 300


@dataclass(frozen=True)
class _Mark:
    """How a run that did not succeed is drawn over its job's colour."""

    hatch: str
    edgecolor: str
    linewidth: float


_MARKS: Final = {
    RunOutcome.FAILED: _Mark("////", "#d62728", 1.0),
    RunOutcome.CANCELLED: _Mark("....", "#555555", 0.8),
}


@dataclass(frozen=True)
class Rendered:
    svg: bytes
    pdf: bytes


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(
        {
            "font.size": 8,
            "axes.titlesize": 9,
            "axes.labelsize": 8,
            "xtick.labelsize": 7,
            "ytick.labelsize": 7,
            "legend.fontsize": 7,
            "svg.fonttype": "none",  # text stays text: selectable in the page, searchable, editable
            "svg.hashsalt": "esi-report",  # ids derived from it, not from a random salt
            "pdf.fonttype": 42,  # TrueType, as publishers ask
        }
    ):
        yield


def gid(*parts: object) -> str:
    """An SVG id from ``parts`` (group index, job, …): letters, digits, ``_.-`` only, joined by ``--``."""
    return "--".join(re.sub(r"[^A-Za-z0-9_.-]", "_", str(part)) for part in parts)


def render(figure: Figure) -> Rendered:
    """``figure`` as SVG and PDF, deterministic: the same figure gives the same bytes."""
    with _style():
        svg, pdf = io.BytesIO(), io.BytesIO()
        figure.savefig(svg, format="svg", dpi=RASTER_DPI, metadata={"Date": None})
        figure.savefig(pdf, format="pdf", dpi=RASTER_DPI, metadata={"CreationDate": None, "ModDate": None})
    return Rendered(svg.getvalue(), pdf.getvalue())


def job_colours(names: Sequence[str]) -> dict[str, str]:
    """A colour per job, by its rank among ``names`` sorted: the same job has the same colour in every figure."""
    palette = matplotlib.colormaps["tab20" if len(set(names)) > 10 else "tab10"]
    return {name: matplotlib.colors.to_hex(palette(index % palette.N)) for index, name in enumerate(sorted(set(names)))}


def all_jobs(groups: Sequence[RunGroup], runtimes: Sequence[Mapping[str, JobRuntimes]] = ()) -> list[str]:
    """Every job the groups' runs name (as runs or neighbours) and every job of ``runtimes`` (also neighbours)."""
    entries = [e for g in groups for e in g.entries]
    of_runs = {e.job for e in entries} | {c.job for e in entries for c in e.colocated}
    of_runtimes = {job for r in runtimes for job in r} | {n for r in runtimes for job in r.values() for n in job.beside}
    return sorted(of_runs | of_runtimes)


def _origin(entries: Sequence[RunEntry]) -> float:
    return min(((e.submitted or e.started).timestamp() for e in entries), default=0.0)


def _outcome_mark(outcome: RunOutcome | None) -> str:
    return outcome.value if outcome in _MARKS else "ok"


def gantt(groups: Sequence[RunGroup], colours: Mapping[str, str]) -> Figure:
    """Slot occupancy of each group, one panel per group stacked on one time axis (seconds since its first run was
    submitted). Bars have ids ``gantt--<group>--<job>--<ok|Failed|Cancelled>``, one SVG path per run and slot."""
    with _style():
        layouts = [slot_layout(g.entries, g.layout) for g in groups]
        heights = [max(len(layout), 1) for layout in layouts]
        figure = Figure(figsize=(WIDTH, min(1.0 + 0.16 * sum(heights) + 0.5 * len(groups), 40)), layout="constrained")
        axes = figure.subplots(len(groups), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
        for index, (group, layout, ax) in enumerate(zip(groups, layouts, axes, strict=True)):
            _gantt_panel(ax, index, group, layout, colours)
        axes[-1].set_xlabel("seconds since the first run was submitted")
        drawn = sorted({e.job for g in groups for e in g.entries})
        handles = [Patch(facecolor=colours[job], label=job) for job in drawn]
        handles += [
            Patch(facecolor="white", label=o.value.lower(), hatch=m.hatch, edgecolor=m.edgecolor, linewidth=m.linewidth)
            for o, m in _MARKS.items()
        ]
        figure.legend(handles=handles, loc="outside right upper", frameon=False)
    return figure


def _gantt_panel(ax: Any, index: int, group: RunGroup, layout: SlotLayout, colours: Mapping[str, str]) -> None:
    places = sorted(layout, key=lambda key: (key[0], layout[key], key[1]))
    row = {key: number for number, key in enumerate(places)}
    origin = _origin(group.entries)
    bars: dict[tuple[str, str], list[list[tuple[float, float]]]] = {}
    for entry in group.entries:
        if entry.ended is None:
            continue
        left, right = entry.started.timestamp() - origin, entry.ended.timestamp() - origin
        for slot in entry.slots:
            y = row[(entry.testbed, slot)]
            box = [(left, y - 0.4), (right, y - 0.4), (right, y + 0.4), (left, y + 0.4)]
            bars.setdefault((entry.job, _outcome_mark(entry.outcome)), []).append(box)
    for (job, outcome), boxes in sorted(bars.items()):
        m = _MARKS.get(RunOutcome(outcome)) if outcome != "ok" else None
        collection = PolyCollection(
            boxes,
            facecolors=colours[job],
            edgecolors=m.edgecolor if m else "none",
            linewidths=m.linewidth if m else 0.0,
            hatch=m.hatch if m else None,
        )
        collection.set_gid(gid("gantt", index, job, outcome))
        collection.set_rasterized(sum(map(len, bars.values())) > VECTOR_BARS)
        ax.add_collection(collection)
    prefix = len({testbed for testbed, _ in places}) > 1  # the Testbed's name too when there are several
    labels = [(f"{key[0]}/" if prefix else "") + f"{layout[key].node}/{layout[key].position}" for key in places]
    ax.set_yticks(range(len(places)), labels)
    ax.set_ylim(len(places) - 0.5, -0.5)  # the first slot on top
    for number in range(1, len(places)):
        if (places[number][0], layout[places[number]].node) != (places[number - 1][0], layout[places[number - 1]].node):
            ax.axhline(number - 0.5, color="#999999", linewidth=0.6)
    ax.autoscale(axis="x")
    ax.set_xlim(left=0)
    ax.set_title(group.title, loc="left")
    ax.set_ylabel("node/slot")
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)


def _categories(runtimes: Sequence[Mapping[str, JobRuntimes]], job: str) -> list[str]:
    neighbours = sorted({n for group in runtimes if job in group for n in group[job].beside})
    return [ALONE, *neighbours]


def slowdown(
    titles: Sequence[str], runtimes: Sequence[Mapping[str, JobRuntimes]], colours: Mapping[str, str]
) -> Figure:
    """A row of panels per job, a column per group (titled ``titles``), one runtime axis per job. Bars have ids
    ``slowdown--<group>--<job>--<alone|neighbour>``, one per condition the job ran in."""
    jobs = sorted({job for group in runtimes for job in group})
    with _style():
        rows = [_categories(runtimes, job) for job in jobs] or [[ALONE]]
        heights = [0.3 + 0.17 * len(categories) for categories in rows]
        columns = max(len(titles), 1)
        figure = Figure(figsize=(WIDTH, min(0.6 + sum(heights) + 0.25 * len(rows), 40)), layout="constrained")
        axes = figure.subplots(len(rows), columns, squeeze=False, sharey="row", height_ratios=heights)
        for row, job in enumerate(jobs):
            categories = rows[row]
            longest = max(
                (s.mean + (s.stdev or 0.0) for g in runtimes if job in g for s in _stats(g[job]).values()), default=1.0
            )
            for column, (group_title, stats_of) in enumerate(zip(titles, runtimes, strict=True)):
                ax = axes[row, column]
                _slowdown_panel(ax, (column, job), categories, stats_of.get(job), colours)
                ax.set_xlim(0, longest * 1.45)  # room for the labels right of the bars
                if row == 0:
                    ax.set_title(group_title, loc="left")
                if column == 0:
                    ax.set_ylabel(job, rotation=0, ha="right", va="center", fontweight="bold")
        for ax in axes[-1]:
            ax.set_xlabel("runtime (s), mean ± standard deviation")
    return figure


def _stats(job: JobRuntimes) -> dict[str, RuntimeStats]:
    return ({ALONE: job.alone} if job.alone is not None else {}) | dict(job.beside)


def _slowdown_panel(
    ax: Any, where: tuple[int, str], categories: Sequence[str], job: JobRuntimes | None, colours: Mapping[str, str]
) -> None:
    index, name = where
    stats = _stats(job) if job is not None else {}
    ax.set_yticks(range(len(categories)), categories)
    ax.set_ylim(len(categories) - 0.5, -0.5)
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    for y, category in enumerate(categories):
        if category not in stats:
            continue
        s = stats[category]
        colour = "#bbbbbb" if category == ALONE else colours.get(category, "#777777")
        bar = ax.barh(y, s.mean, height=0.7, color=colour, xerr=s.stdev, error_kw={"linewidth": 0.8, "capsize": 2})
        bar.patches[0].set_gid(gid("slowdown", index, name, category))
        ratio = job.slowdown(category) if job is not None and category != ALONE else None
        label = (
            f"×{ratio:.2f}  "  # noqa: RUF001 (the multiplication sign)
            if ratio is not None
            else ""
        ) + f"n={s.samples}"
        ax.annotate(label, (s.mean + (s.stdev or 0.0), y), xytext=(3, 0), textcoords="offset points", va="center")


def _relative(job: JobRuntimes, cells: Sequence[RuntimeStats | None]) -> tuple[list[float | None], bool]:
    """The cells' means over the job's runtime alone, or when never alone over its smallest mean (then True)."""
    means = [c.mean for c in cells if c is not None]
    reference = job.alone.mean if job.alone is not None else min(means, default=0.0)
    if not reference:
        return [None] * len(cells), job.alone is None
    return [c.mean / reference if c is not None else None for c in cells], job.alone is None


def colocation(titles: Sequence[str], runtimes: Sequence[Mapping[str, JobRuntimes]]) -> Figure:
    """The co-location matrix of each group (titled ``titles``) as a heatmap, side by side on one colour scale. Cell
    labels have ids ``colocation--<group>--<job>--<alone|neighbour>`` and read ``<mean> s`` over ``(<runs>)``."""
    tables = []
    for stats_of in runtimes:
        jobs, neighbours, cells = colocation_matrix(stats_of)
        rows = [[stats_of[job].alone, *row] for job, row in zip(jobs, cells, strict=True)]
        relative = [_relative(stats_of[job], row) for job, row in zip(jobs, rows, strict=True)]
        tables.append((jobs, [ALONE, *neighbours], rows, relative))
    values = [v for _, _, _, rel in tables for row, _ in rel for v in row if v is not None]
    norm = Normalize(vmin=min([1.0, *values]), vmax=max([1.0, *values]) + 1e-9)
    with _style():
        widest = max((len(columns) for _, columns, _, _ in tables), default=1)
        tallest = max((len(jobs) for jobs, _, _, _ in tables), default=1)
        figure = Figure(figsize=(WIDTH, 1.6 + 0.42 * tallest), layout="constrained")
        axes = figure.subplots(1, max(len(titles), 1), squeeze=False)[0]
        image = None
        for index, (group_title, ax, (jobs, columns, rows, relative)) in enumerate(
            zip(titles, axes, tables, strict=True)
        ):
            grid = [[v if v is not None else float("nan") for v in rel] for rel, _ in relative]
            image = ax.imshow(grid or [[float("nan")]], cmap="YlOrRd", norm=norm, aspect="auto")
            for y, (job, row) in enumerate(zip(jobs, rows, strict=True)):
                for x, cell in enumerate(row):
                    if cell is None:
                        continue
                    shade = norm(relative[y][0][x] or 1.0)
                    text = ax.text(
                        x, y, f"{cell.mean:.0f} s\n({cell.samples})", ha="center", va="center",
                        fontsize=6.5 if widest > 6 else 7, color="white" if shade > 0.6 else "black",
                    )  # fmt: skip
                    text.set_gid(gid("colocation", index, job, columns[x]))
            marked = [job + (" *" if never_alone else "") for job, (_, never_alone) in zip(jobs, relative, strict=True)]
            ax.set_yticks(range(len(jobs)), marked)
            ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
            ax.tick_params(length=0)
            ax.set_title(group_title, loc="left")
            ax.set_xlabel("beside")
        if image is not None:
            bar = figure.colorbar(image, ax=list(axes), shrink=0.9)
            never_alone = any(flag for _, _, _, relative in tables for _, flag in relative)
            bar.set_label("runtime ÷ runtime alone" + ("\n(* never alone: ÷ its fastest)" if never_alone else ""))
    return figure
