"""The run table through the Python client and ``esi runs``, against the API's app (no cluster): pages followed,
filters sent, each output format as a user reads it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from api.app import create_api_app
from api.auth import StaticToken
from api.runs import RunStore
from esi.client.api_client import EsiClient, RunFilter
from esi.client.cli import Connector, app
from esi.results.table import COLUMNS, RunEntry
from tests.builders import run_object

TOKEN = "s3cret-token"  # noqa: S105 (a test token)
RUNS = 25


@pytest.fixture
def transport() -> Iterator[httpx.BaseTransport]:
    """The API's app, answering the client as the network would."""
    store = RunStore()
    store.listed(
        [run_object("pi" if i % 2 else "wc", i + 1, i * 10.0, 15.0, ["n1"], namespace="default") for i in range(RUNS)]
    )
    with TestClient(create_api_app(StaticToken(TOKEN), run_store=store)) as api:

        def forward(request: httpx.Request) -> httpx.Response:
            answer = api.request(request.method, str(request.url), headers=dict(request.headers))
            return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

        yield httpx.MockTransport(forward)


def esi(transport: httpx.BaseTransport, *args: str) -> Result:
    environment = {"ESI_URL": None, "ESI_TOKEN": TOKEN, "ESI_NAMESPACE": None, "COLUMNS": "200"}
    return CliRunner().invoke(app, list(args), obj=Connector(transport=transport), env=environment)


def test_the_client_follows_the_pages_to_every_run(transport: httpx.BaseTransport) -> None:
    with EsiClient("http://esi", token=TOKEN, transport=transport) as client:
        runs = list(client.runs(page_size=4))
        pages = list(client.run_pages(RunFilter(job=["pi"]), page_size=5))
        csv_text = b"".join(client.runs_csv(page_size=7)).decode()

    assert all(isinstance(r, RunEntry) for r in runs)
    assert [r.ordinal for r in runs] == list(range(1, RUNS + 1))
    assert runs[1].colocated[0].job == "wc"
    assert [len(p.items) for p in pages] == [5, 5, 2]
    assert pages[-1].continue_ is None
    header, *lines = list(csv.reader(io.StringIO(csv_text)))
    assert (tuple(header), len(lines)) == (COLUMNS, RUNS), "one header, then every run once"


def test_esi_runs_csv_and_json_hold_every_run(transport: httpx.BaseTransport, tmp_path: Path) -> None:
    as_csv = esi(transport, "runs", "-o", "csv")
    as_json = esi(transport, "runs", "-o", "json", "--job", "pi", "--output-file", str(tmp_path / "runs.json"))

    assert as_csv.exit_code == 0, as_csv.output
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == RUNS
    assert rows[1]["colocated"] == "wc=10.0", "two runs of wc, 5 s each"
    assert as_json.exit_code == 0, as_json.output
    entries = json.loads((tmp_path / "runs.json").read_text())
    assert {e["job"] for e in entries} == {"pi"}
    assert [RunEntry.model_validate(e).ordinal for e in entries] == list(range(2, RUNS + 1, 2))


def test_esi_runs_table_shows_the_main_columns(transport: httpx.BaseTransport) -> None:
    result = esi(transport, "runs", "--until", "2026-11-28T12:00:15Z")

    assert result.exit_code == 0, result.output
    assert "MET" in result.stdout
    assert "wc 10.0s" in result.stdout
    assert len([line for line in result.stdout.splitlines() if " pi " in line or " wc " in line]) == 2


def test_esi_runs_without_runs_says_when_a_run_is_listed(transport: httpx.BaseTransport) -> None:
    result = esi(transport, "runs", "--job", "nobody")

    assert result.exit_code == 0, result.output
    assert "no runs (a run is listed once its Scheduling lets the job go" in " ".join(result.stdout.split())


def test_esi_runs_parquet_has_typed_columns(transport: httpx.BaseTransport, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "runs.parquet"

    result = esi(transport, "runs", "-o", "parquet", "--output-file", str(path))

    assert result.exit_code == 0, result.output
    table = pq.read_table(path)
    assert table.num_rows == RUNS
    assert tuple(table.column_names) == COLUMNS
    types = {field.name: str(field.type) for field in table.schema}
    assert types["started"] == "timestamp[us, tz=UTC]"
    assert types["runtimeSeconds"] == "double"
    assert types["colocated"] == "list<element: struct<job: string, seconds: double>>"
    assert table.column("colocated")[1].as_py() == [{"job": "wc", "seconds": 10.0}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "parquet"], "--output-file"),
        (["--output-file", "x.txt"], "csv, json or parquet"),
        (["--since", "yesterday"], "not an ISO 8601 time"),
    ],
)
def test_esi_runs_refuses_what_it_cannot_do(transport: httpx.BaseTransport, args: list[str], message: str) -> None:
    result = esi(transport, "runs", *args)

    assert result.exit_code != 0
    assert message in result.output


def test_without_pyarrow_parquet_says_how_to_get_it(
    transport: httpx.BaseTransport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)

    result = esi(transport, "runs", "-o", "parquet", "--output-file", str(tmp_path / "runs.parquet"))

    assert result.exit_code == 1
    assert "pip install 'esi[analysis]'" in result.output
