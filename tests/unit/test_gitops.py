"""The manifests committed under ``manifests/``, as ``pulumi up`` reads them before registering anything: every
valid one in the order they are applied, or one error naming each bad document's file, place and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from infra.stacks.gitops import ManifestError, committed_objects
from tests.manifests import batchjob_manifest, scheduling_manifest, testbed_manifest


def commit(directory: Path, name: str, *documents: Any) -> None:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents))


def test_committed_objects_are_checked_and_ordered_testbeds_first_with_the_default_namespace(tmp_path: Path) -> None:
    commit(tmp_path, "a-schedulings.yaml", scheduling_manifest())
    commit(tmp_path, "nested/b.yml", batchjob_manifest(), testbed_manifest() | {"metadata": {"name": "tb"}})
    (tmp_path / "notes.txt").write_text("not a manifest: not read")

    found = committed_objects(tmp_path, "team")

    assert [c.key for c in found] == ["Testbed:team/tb", "BatchJob:team/spark-crawler", "Scheduling:team/sched"]
    assert [c.source for c in found] == ["nested/b.yml#2", "nested/b.yml#1", "a-schedulings.yaml#1"]


def test_every_bad_document_is_named_with_its_file_place_and_field_and_nothing_is_returned(tmp_path: Path) -> None:
    broken = testbed_manifest(slotsPerNode=0, resourcesPerSlot={"cpu": "lots", "memory": "1Gi"})
    broken["metadata"]["name"] = "broken"
    with_status = batchjob_manifest() | {"status": {"state": "Ready"}}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    commit(tmp_path, "a.yaml", testbed_manifest(), broken, ["a", "list"])
    commit(tmp_path, "b.yaml", config_map, with_status, testbed_manifest())

    with pytest.raises(ManifestError) as refused:
        committed_objects(tmp_path, "default")

    assert isinstance(refused.value, pulumi.RunError), "Pulumi shows the message without a traceback"
    head, *problems = str(refused.value).splitlines()
    assert head == "invalid manifests, nothing applied:"
    assert [p.split(":")[0].strip() for p in problems] == ["a.yaml#2", "a.yaml#3", "b.yaml#1", "b.yaml#2", "b.yaml#3"]
    assert "Testbed broken: spec.slotsPerNode:" in problems[0]
    assert "spec.resourcesPerSlot.cpu: Value error, 'lots' is not a Kubernetes quantity" in problems[0]
    assert "a manifest is a mapping, not list" in problems[1]
    assert "holds esi.tu-berlin.de/v1alpha1 Testbeds, BatchJobs and Schedulings, not v1 ConfigMap" in problems[2]
    assert "BatchJob spark-crawler: status is esi's to write, not Git's" in problems[3]
    assert "Testbed:default/profiler-testbed is also in a.yaml#1" in problems[4]


def test_a_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: Testbed\n  spec: [unclosed\n")

    with pytest.raises(ManifestError, match=r"bad\.yaml: not YAML"):
        committed_objects(tmp_path, "default")
