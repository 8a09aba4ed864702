"""The generated CRDs on the real API server: they install, accept valid manifests (original-format ones
too), and the API server itself rejects each invalid manifest with a message naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.local_cluster import ClusterError, LocalCluster
from tests.integration.kube import create_in
from tests.manifests import INVALID, VALID, Invalid, read, testbed_manifest
from tests.original_manifests import ORIGINAL


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


def test_the_original_manifests_are_accepted_and_read_back_as_what_esi_runs(
    esi_crds: LocalCluster, namespace: str
) -> None:
    for i, case in enumerate(ORIGINAL.values()):
        create_in(esi_crds, namespace, case.manifest | {"metadata": {"name": f"original-{i}"}})

    for i, case in enumerate(ORIGINAL.values()):
        kind = case.manifest["kind"]
        stored = json.loads(esi_crds.kubectl("get", "-n", namespace, kind.lower(), f"original-{i}", "-o", "json"))
        assert stored["spec"] == case.manifest["spec"], f"{kind} original-{i}: the API server pruned or changed it"
        spec = read(stored).model_dump(mode="json", exclude_none=True)["spec"]
        assert {key: spec.get(key) for key in case.reads_as} == case.reads_as, f"{kind} original-{i}"


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


def test_status_is_written_only_through_its_subresource(esi_crds: LocalCluster, namespace: str) -> None:
    create_in(esi_crds, namespace, testbed_manifest())
    # Each check reads the API server's answer to that very write: the session's Testbed reconciler, when
    # running, writes this status too.
    status = {"status": {"state": "Ready", "counts": {"nodes": 2, "slots": 4, "free": 4}}}
    written = patch(esi_crds, namespace, status, "--subresource=status")
    assert written["status"]["state"] == "Ready"
    # (a merge: counts the reconciler wrote before may sit beside these)
    assert written["status"]["counts"] | {"nodes": 2, "slots": 4, "free": 4} == written["status"]["counts"]

    # A write to the main resource cannot change status: only its own writer, through /status, can.
    ignored = patch(esi_crds, namespace, {"status": {"state": "InUse"}})
    assert ignored["status"]["state"] != "InUse"


def test_printer_columns_show_the_status(esi_crds: LocalCluster, namespace: str) -> None:
    create_in(esi_crds, namespace, testbed_manifest())
    patch(esi_crds, namespace, {"status": {"state": "Ready", "counts": {"nodes": 2, "slots": 4, "free": 4}}},
          "--subresource=status")  # fmt: skip

    for _ in range(10):  # the table and the object compared only when nothing wrote in between
        before = get(esi_crds, namespace)
        row = esi_crds.kubectl("get", "tb", "-n", namespace, "--no-headers").split()
        after = get(esi_crds, namespace)
        if before["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]:
            break
    else:
        pytest.fail("the Testbed changed between every pair of reads")
    counts, state = after["status"]["counts"], after["status"]["state"]
    assert row[:5] == ["profiler-testbed", str(counts["nodes"]), str(counts["slots"]), str(counts["free"]), state]


def patch(cluster: LocalCluster, namespace: str, body: dict[str, Any], *options: str) -> dict[str, Any]:
    answer = cluster.kubectl("patch", "-n", namespace, "testbed", "profiler-testbed", "--type=merge",
                             "-p", json.dumps(body), "-o", "json", *options)  # fmt: skip
    written: dict[str, Any] = json.loads(answer)
    return written


def get(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    read: dict[str, Any] = json.loads(
        cluster.kubectl("get", "-n", namespace, "testbed", "profiler-testbed", "-o", "json")
    )
    return read
