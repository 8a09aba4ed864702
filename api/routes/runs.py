"""``GET /external/runs``: the run table of a namespace (``esi.results.table``), filtered and paged, as JSON or CSV.

A page is selected at once and then streamed, a chunk of rows at a time, each row as ``RenderedRuns`` keeps it
rendered: 100,000 rows go out in one answer without a 50 MB string built first. Between chunks the event loop
serves others; rows removed meanwhile are still sent as they were selected.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BeforeValidator

from api.dependencies import Namespace, Runs, may
from api.problems import Problem, refusals
from esi.resources.batchjob import RunOutcome
from esi.results.table import (
    CSV_HEADER,
    Cursor,
    RunPage,
    RunQuery,
    RunRow,
    continue_token,
    continued,
    label_selector,
)
from esi.wire.rest import FieldProblem

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "RunFormat", "router"]

router = APIRouter(prefix="/external", tags=["runs"])

DEFAULT_LIMIT: Final = 1_000
MAX_LIMIT: Final = 100_000
CHUNK: Final = 1_000  # rows per piece of the answer's body
CONTINUE_HEADER: Final = "Esi-Continue"


class RunFormat(StrEnum):
    JSON = "json"
    CSV = "csv"


_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")


def _rfc3339(value: object) -> object:
    """A moment as RFC 3339 writes it, as documented (pydantic alone would read a number as Unix seconds)."""
    if isinstance(value, str) and not _RFC3339.fullmatch(value):
        raise ValueError("not an RFC 3339 moment (e.g. 2026-11-28T18:00:00Z)")
    return value


Moment = Annotated[datetime, BeforeValidator(_rfc3339)]


def _query_problem(field: str, problem: str) -> Problem:
    return Problem(422, f"invalid request: query.{field}", [FieldProblem(field=f"query.{field}", problem=problem)])


_CSV_DESCRIPTION: Final = (
    "With `format=csv`: a header line naming the columns (RunEntry's fields, in its order), then a line per run; "
    "lists joined by `;`, a co-located job as `job=seconds` (empty seconds: unknown)."
)


@router.get(
    "/runs",
    summary="The run table: finished runs, filtered and paged, as JSON or CSV",
    description="Every finished run of the namespace's BatchJobs (one Run object each), with the jobs it met on "
    "its nodes and for how many seconds, in order of start. Filters of different kinds must all hold; repeated "
    "values of one filter are alternatives. A page ends where `continue` (also in the `Esi-Continue` header) "
    "says; pass it back for the next. Columns: docs/how-to/runs-as-data.md.",
    response_model=RunPage,
    dependencies=[may("list", "runs")],
    responses={
        **refusals(),
        200: {
            "description": "A page of runs",
            "headers": {CONTINUE_HEADER: {"description": "The next page's token; absent on the last page."}},
            "content": {"text/csv": {"schema": {"type": "string"}, "example": CSV_HEADER}},
        },
    },
)
async def list_runs(  # noqa: PLR0917 (FastAPI passes what the route declares)
    runs: Runs,
    namespace: Namespace,
    job: Annotated[list[str], Query(description="Runs of this BatchJob (repeatable).")] = [],  # noqa: B006
    scheduling: Annotated[list[str], Query(description="Runs in this Scheduling (repeatable).")] = [],  # noqa: B006
    testbed: Annotated[list[str], Query(description="Runs on this Testbed (repeatable).")] = [],  # noqa: B006
    outcome: Annotated[list[RunOutcome], Query(description="Runs that ended so (repeatable).")] = [],  # noqa: B006
    selector: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="A label selector, as `kubectl get -l` takes it: `key=value`, `key!=value`, "
            "`key in (a,b)`, `key notin (a,b)`, `key`, `!key`, comma-separated (all must hold).",
        ),
    ] = None,
    since: Annotated[
        Moment | None, Query(description="Runs that ended at or after this moment (RFC 3339; UTC if no zone).")
    ] = None,
    until: Annotated[Moment | None, Query(description="Runs that started before this moment.")] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description=f"Runs per page, at most {MAX_LIMIT:,}.")
    ] = DEFAULT_LIMIT,
    continue_: Annotated[
        str | None, Query(alias="continue", description="The token of the page before, as it came.")
    ] = None,
    format: Annotated[
        RunFormat, Query(description="json (the default): a RunPage; csv: " + _CSV_DESCRIPTION)
    ] = RunFormat.JSON,
) -> StreamingResponse:
    try:
        labels = label_selector(selector or "")
    except ValueError as err:
        raise _query_problem("selector", str(err)) from err
    after: Cursor | None = None
    if continue_ is not None:
        try:
            after = continued(continue_)
        except ValueError as err:
            raise _query_problem("continue", str(err)) from err
    if not runs.synced:
        raise Problem(503, "the API is still listing the cluster's Runs; ask again in a few seconds")
    query = RunQuery(
        namespace=namespace,
        jobs=frozenset(job),
        schedulings=frozenset(scheduling),
        testbeds=frozenset(testbed),
        outcomes=frozenset(outcome),
        labels=labels,
        since=since,
        until=until,
    )
    page = runs.rendered.table.select(query, after=after, limit=limit)
    token = continue_token(page.next) if page.next is not None else None
    headers = {CONTINUE_HEADER: token} if token is not None else {}
    if format is RunFormat.CSV:
        body = _chunks(page.rows, runs.rendered.csv, CSV_HEADER.encode(), b"", b"")
        return StreamingResponse(body, media_type="text/csv; charset=utf-8", headers=headers)
    end = b'],"continue":' + (f'"{token}"'.encode() if token is not None else b"null") + b"}"
    body = _chunks(page.rows, runs.rendered.json, b'{"items":[', b",", end)
    return StreamingResponse(body, media_type="application/json", headers=headers)


async def _chunks(
    rows: list[RunRow], render: Callable[[RunRow], bytes], head: bytes, separator: bytes, tail: bytes
) -> AsyncIterator[bytes]:
    yield head
    for start in range(0, len(rows), CHUNK):
        piece = separator.join(render(row) for row in rows[start : start + CHUNK])
        yield (separator if start and separator else b"") + piece
        await asyncio.sleep(0)  # let other requests and the watches in between
    yield tail
