"""The generated CRDs on the real API server: they install, accept valid manifests (original-format ones
too), and the API server itself rejects each invalid manifest with a message naming the field."""

from __future__ import annotations

import json

import pytest

from infra.local_cluster import ClusterError, LocalCluster
from tests.integration.kube import create_in
from tests.manifests import INVALID, VALID, Invalid, testbed_manifest


def test_valid_manifests_are_accepted_and_listed_under_the_esi_category(esi_crds: LocalCluster, namespace: str) -> None:
    for i, manifest in enumerate(VALID.values()):
        named = {**manifest, "metadata": {"name": f"valid-{i}"}}
        create_in(esi_crds, namespace, named)

    listed = esi_crds.kubectl("get", "esi", "-n", namespace, "-o", "json")
    kinds = sorted({item["kind"] for item in json.loads(listed)["items"]})
    assert kinds == ["BatchJob", "Scheduling", "Testbed"]
    assert len(json.loads(listed)["items"]) == len(VALID)
    short = esi_crds.kubectl("get", "tb,bj,sched", "-n", namespace, "-o", "name")
    assert len(short.split()) == len(VALID)


@pytest.mark.parametrize("case", INVALID.values(), ids=INVALID.keys())
def test_the_api_server_rejects_invalid_manifests_naming_the_field(
    esi_crds: LocalCluster, namespace: str, case: Invalid
) -> None:
    with pytest.raises(ClusterError) as refused:
        create_in(esi_crds, namespace, case.manifest)

    message = str(refused.value)
    # Field errors read "spec.x: Invalid value: ..."; unknown fields (kubectl asks for strict decoding)
    # read 'unknown field "spec.x"'.
    assert f"{case.field}: " in message or f'"{case.field}"' in message, message
    assert case.message in message, message
    assert esi_crds.kubectl("get", "esi", "-n", namespace, "-o", "name").strip() == ""


def test_status_is_a_subresource_shown_in_the_printer_columns(esi_crds: LocalCluster, namespace: str) -> None:
    create_in(esi_crds, namespace, testbed_manifest())
    status = {"status": {"state": "Ready", "counts": {"nodes": 2, "slots": 4, "free": 4}}}

    esi_crds.kubectl("patch", "-n", namespace, "testbed", "profiler-testbed", "--subresource=status", "--type=merge",
                     "-p", json.dumps(status))  # fmt: skip
    # A write to the main resource cannot change status: only its own writer, through /status, can.
    esi_crds.kubectl("patch", "-n", namespace, "testbed", "profiler-testbed", "--type=merge",
                     "-p", json.dumps({"status": {"state": "InUse"}}))  # fmt: skip

    table = esi_crds.kubectl("get", "tb", "-n", namespace, "--no-headers").split()
    assert table[:5] == ["profiler-testbed", "2", "4", "4", "Ready"]
