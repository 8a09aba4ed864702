"""An experiment's report: one self-contained HTML page (figures inline as SVG, no script, no outside asset) and
the files a paper uses — each figure as SVG and PDF, the headline figures as CSV and JSON.

Groups of runs (one per Scheduling, selector or file) are reported side by side: a column each in the summary
and co-location tables, a panel each in the figures (``esi.results.figures``). Reference tables (co-location
tables such as the thesis', ``esi.results.calibration``) follow the groups in the slowdown and co-location
figures and tables, for comparison; they have no runs, so no Gantt chart or summary. Pure: runs in, files' bytes
out.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from string import Template
from typing import Final

from esi.results import figures
from esi.results.metrics import FIGURES, JobRuntimes, RunGroup, Summary, colocation_matrix, job_runtimes, summary

__all__ = ["Report", "build_report"]

_SUMMARY_ROWS: Final = (
    ("runs", "runs"),
    ("jobs", "jobs"),
    ("makespan_seconds", "makespan (s)"),
    ("waiting_mean_seconds", "waiting, mean (s)"),
    ("waiting_p95_seconds", "waiting, 95th percentile (s)"),
    ("slots", "slots"),
    ("utilisation", "slot utilisation"),
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
    ("retried", "retried (attempt > 1)"),
    ("first_submitted", "first submitted"),
    ("last_ended", "last ended"),
)

_PAGE: Final = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>$title</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 64em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.8em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 0 0 2em; }
figure svg { width: 100%; height: auto; }
figcaption, .note { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>$title</h1>
<p class="note">$note</p>
<h2>Summary</h2>
$summary
$figures
<h2>Co-location tables</h2>
<p class="note">Mean runtime in seconds of the row's job alone and beside the column's job, runs in brackets
(succeeded runs only).</p>
$tables
</body>
</html>
""")


@dataclass(frozen=True)
class Report:
    """The report's files by name (``report.html``, ``gantt.svg``, …) and its headline figures per group."""

    files: Mapping[str, bytes]
    summaries: Mapping[str, Summary]


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return html.escape(str(value))


def _summary_table(summaries: Mapping[str, Summary]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for title in summaries)
    rows = []
    for field, label in _SUMMARY_ROWS:
        cells = []
        for s in summaries.values():
            value = getattr(s, field)
            shown = f"{value:.1%}" if field == "utilisation" and isinstance(value, float) else _cell(value)
            cells.append(f"<td>{shown}</td>")
        rows.append(f"<tr><td>{html.escape(label)}</td>{''.join(cells)}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _colocation_table(runtimes: Mapping[str, JobRuntimes]) -> str:
    jobs, neighbours, cells = colocation_matrix(runtimes)
    if not jobs:
        return '<p class="note">No succeeded runs.</p>'
    head = "".join(f"<th>{html.escape(n)}</th>" for n in [figures.ALONE, *neighbours])
    rows = []
    for job, row in zip(jobs, cells, strict=True):
        shown = [
            "/" if stats is None else f"{stats.mean:.0f} ({stats.samples})" for stats in [runtimes[job].alone, *row]
        ]
        rows.append(f"<tr><td>{html.escape(job)}</td>{''.join(f'<td>{c}</td>' for c in shown)}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


_SVG_ID: Final = re.compile(r'(\sid="|url\(#|href="#)')


def _inline(svg: bytes, name: str) -> str:
    """An SVG document as an element of the page: without its XML declaration and doctype, its ids (and references
    to them) prefixed with ``name``, so the page's SVGs share no id."""
    text = svg.decode()
    return _SVG_ID.sub(rf"\g<1>{name}-", text[text.index("<svg") :])


def _summary_csv(summaries: Mapping[str, Summary]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["group", *(field for field, _ in _SUMMARY_ROWS)])
    for title, s in summaries.items():
        plain = s.as_dict()
        writer.writerow([title, *("" if plain[field] is None else plain[field] for field, _ in _SUMMARY_ROWS)])
    return out.getvalue().encode()


def build_report(
    groups: Sequence[RunGroup],
    title: str,
    generated: datetime | None = None,
    references: Mapping[str, Mapping[str, JobRuntimes]] | None = None,
) -> Report:
    """The report of ``groups`` side by side, then the ``references`` tables by title; ``generated``: when, as the
    page says (None: not said)."""
    if not groups:
        raise ValueError("a report needs at least one group of runs")
    summaries = {group.title: summary(group.entries, group.layout) for group in groups}
    panels = {group.title: job_runtimes(group.entries) for group in groups} | dict(references or {})
    titles, runtimes = list(panels), list(panels.values())
    colours = figures.job_colours(figures.all_jobs(groups, runtimes))
    drawn = {
        "gantt": figures.gantt(groups, colours),
        "slowdown": figures.slowdown(titles, runtimes, colours),
        "colocation": figures.colocation(titles, runtimes),
    }
    files: dict[str, bytes] = {}
    sections = []
    for name, figure in drawn.items():
        rendered = figures.render(figure)
        files[f"{name}.svg"], files[f"{name}.pdf"] = rendered.svg, rendered.pdf
        sections.append(
            f'<h2>{html.escape(FIGURES[name][0])}</h2>\n<figure id="{name}">{_inline(rendered.svg, name)}'
            f"<figcaption>{html.escape(FIGURES[name][1])}</figcaption></figure>"
        )
    tables = "\n".join(f"<h3>{html.escape(name)}</h3>{_colocation_table(r)}" for name, r in panels.items())
    when = f", generated {generated.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if generated is not None else ""
    note = f"{sum(len(g.entries) for g in groups):,} runs in {len(groups)} group(s){when}."
    page = _PAGE.substitute(
        title=html.escape(title),
        note=html.escape(note),
        summary=_summary_table(summaries),
        figures="\n".join(sections),
        tables=tables,
    )
    files["summary.csv"] = _summary_csv(summaries)
    files["summary.json"] = (
        json.dumps({title: s.as_dict() for title, s in summaries.items()}, indent=2).encode() + b"\n"
    )
    files["report.html"] = page.encode()
    return Report(files, summaries)
