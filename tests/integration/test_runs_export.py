"""Runs as data against ``python -m api`` and a real API server: the API follows the Runs the cluster holds into
its run table — created, relabelled and deleted — and the client and ``esi runs`` export them."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from esi.client.api_client import EsiClient, RunFilter
from esi.client.cli import app
from esi.results.table import COLUMNS
from infra.local_cluster import LocalCluster
from tests.builders import run_object
from tests.integration.conftest import EsiApi, esi_api
from tests.integration.kube import wait_for


@pytest.fixture(scope="module")
def esi_endpoint(esi_crds: LocalCluster) -> EsiApi:
    """``python -m api`` on the session's cluster: Runs need no reconciler."""
    return esi_api(esi_crds)


def test_the_api_exports_the_runs_the_cluster_holds(
    esi_endpoint: EsiApi, cluster: LocalCluster, namespace: str
) -> None:
    runs = [
        run_object("pi", 1, 0, 100, ["n1", "n2"], namespace=namespace, labels={"experiment": "e1"}),
        run_object("wc", 1, 50, 100, ["n2"], namespace=namespace),
        run_object("wc", 2, 300, 10, ["n1"], namespace=namespace, outcome="Failed"),
    ]
    cluster.kubectl("create", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": runs}))

    with EsiClient(esi_endpoint.url, token=esi_endpoint.token, namespace=namespace) as client:

        def exported(count: int) -> list[str] | None:
            names = [r.name for r in client.runs(page_size=2)]
            return names if len(names) == count else None

        assert wait_for("the three Runs in the API", lambda: exported(3)) == [r["metadata"]["name"] for r in runs]
        pi = next(client.runs(RunFilter(selector="experiment=e1")))
        assert [(c.job, c.seconds) for c in pi.colocated] == [("wc", 50.0)], "met on n2, counted once"
        assert [r.name for r in client.runs(RunFilter(outcome=["Failed"]))] == ["wc-uid-wc-2"]

        cluster.kubectl("label", "-n", namespace, "run", "wc-uid-wc-2", "experiment=e1")
        wait_for("the relabelled Run", lambda: len(list(client.runs(RunFilter(selector="experiment=e1")))) == 2)
        cluster.kubectl("delete", "-n", namespace, "run", "wc-uid-wc-1")
        wait_for("the deleted Run gone", lambda: exported(2))
        assert next(client.runs()).colocated == [], "what pi met is gone with its Run"

    result = CliRunner().invoke(
        app,
        ["--url", esi_endpoint.url, "--token", esi_endpoint.token, "runs", "-n", namespace, "-o", "csv"],
        env={"ESI_URL": None, "ESI_TOKEN": None, "ESI_NAMESPACE": None},
    )
    assert result.exit_code == 0, result.output
    header, *lines = list(csv.reader(io.StringIO(result.stdout)))
    assert (tuple(header), [line[1] for line in lines]) == (COLUMNS, ["pi-uid-pi-1", "wc-uid-wc-2"])
