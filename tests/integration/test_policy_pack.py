"""esi's policy pack, run by a real ``pulumi preview``/``pulumi up`` against the session's cluster, offline.

A temporary Pulumi project declares a Testbed over one KWOK node (declared in the stack too, so the pack
knows its slots), two BatchJobs and a Scheduling; the slot jobs come from stack config, so each step only
changes the Scheduling. A good Scheduling is applied; a bad one is refused — by ``preview`` and by ``up``
(in the preview it runs first) — with the policy's message, and the Scheduling in the cluster stays as it
was.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

import policies
from infra.local_cluster import LocalCluster, NodeSpec, node_manifest
from infra.stacks import pulumi_local
from kube.resources import SchedulingResource

# `--policy-pack policies` (the directory) cannot run with this toolchain's language host: see the script.
POLICY_PACK = Path(policies.__file__).resolve().parent / "esi-policy-pack"

PROGRAM = """
import json

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.yaml.v2 import ConfigGroup

config = pulumi.Config()
namespace = config.require("namespace")
provider = k8s.Provider("cluster", kubeconfig=config.require("kubeconfig"))
opts = pulumi.ResourceOptions(provider=provider)


def esi(kind, name, spec):
    return k8s.apiextensions.CustomResource(
        name,
        api_version="esi.tu-berlin.de/v1alpha1",
        kind=kind,
        metadata={"name": name, "namespace": namespace},
        spec=spec,
        opts=opts,
    )


ConfigGroup("nodes", objs=[json.loads(config.require("node"))], opts=opts)
esi(
    "Testbed",
    "tb",
    {"nodeLabel": config.require("label"), "slotsPerNode": 4, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}},
)
for job in ("wordcount", "pagerank"):
    # With account "none", wordcount's driver names no ServiceAccount: a job that could never run.
    driver = {} if job == "wordcount" and config.get("account") == "none" else {"serviceAccount": "spark"}
    spark = {"type": "Scala", "mainApplicationFile": f"local:///opt/{job}.jar", "driver": driver}
    esi("BatchJob", job, {"sparkSpec": spark})
esi("Scheduling", "nightly", {"testbed": {"name": "tb"}, "slotBased": {"jobs": json.loads(config.require("jobs"))}})
"""

GOOD_SLOTS = {"wordcount": [0, 1], "pagerank": [2, 3]}

Pulumi = Callable[..., str]


def slot_jobs(slots: dict[str, list[int]]) -> str:
    return json.dumps([{"name": {"name": job}, "slotIds": ids} for job, ids in slots.items()])


@pytest.fixture
def stack(
    cluster: LocalCluster, esi_crds: LocalCluster, namespace: str, unique: str, tmp_path: Path
) -> Iterator[Pulumi]:
    """``pulumi <args>`` in a fresh project and stack over the session's cluster; destroyed afterwards."""
    project = tmp_path / "policed"
    project.mkdir()
    venv = Path(sys.executable).parent.parent
    (project / "Pulumi.yaml").write_text(
        json.dumps({"name": "policed", "runtime": {"name": "python", "options": {"virtualenv": str(venv)}}})
    )
    (project / "__main__.py").write_text(PROGRAM)
    env = pulumi_local.environment(home=tmp_path / "pulumi-home", backend=tmp_path / "state")
    pulumi_local.ensure_kubernetes_plugin(env, cwd=project)

    def pulumi(*args: str) -> str:
        return pulumi_local.run(list(args), cwd=project, env=env)

    # One KWOK node of 4 cpu / 8Gi carrying the Testbed's label (node id 0): 4 slots of 1 cpu / 1Gi, ids 0-3.
    # Tainted, so no other test's pods land on it.
    label = f"esi.test/policy-{unique}"
    node: dict[str, Any] = node_manifest(NodeSpec(f"policy-{unique}", cpu="4", memory="8Gi", labels={label: "0"}))
    node["spec"] = {"taints": [{"key": "esi.test/policy", "effect": "NoSchedule"}]}
    pulumi("stack", "init", "policed")
    for key, value in {
        "kubeconfig": str(cluster.kubeconfig),
        "namespace": namespace,
        "label": label,
        "node": json.dumps(node),
        "jobs": slot_jobs(GOOD_SLOTS),
    }.items():
        pulumi("config", "set", key, value)
    yield pulumi
    pulumi("destroy", "--yes", "--skip-preview")


def refusal(pulumi: Pulumi, *args: str) -> str:
    """What pulumi printed when it refused to go on (it must refuse)."""
    with pytest.raises(pulumi_local.PulumiError) as refused:
        pulumi(*args)
    return str(refused.value)


def scheduling_spec(client: Client, namespace: str) -> tuple[int, dict[str, Any]]:
    found = client.get(SchedulingResource, "nightly", namespace=namespace)
    assert found.metadata is not None
    assert found.metadata.generation is not None
    return found.metadata.generation, dict(found["spec"])


def test_pulumi_up_applies_a_good_scheduling_and_refuses_a_bad_one_changing_nothing(
    stack: Pulumi, client: Client, namespace: str
) -> None:
    applied = stack("up", "--yes", "--policy-pack", str(POLICY_PACK))
    assert "esi@v0.1.0" in applied  # the pack ran (its version from PulumiPolicy.yaml)
    before = scheduling_spec(client, namespace)
    assert [job["slotIds"] for job in before[1]["slotBased"]["jobs"]] == [[0, 1], [2, 3]]

    stack("config", "set", "jobs", slot_jobs({"wordcount": [0, 1], "pagerank": [2, 99]}))
    missing_slot = (
        f"Scheduling {namespace}/nightly on Testbed {namespace}/tb: "
        "job 'pagerank' lists slot 99, which testbed does not have (it has slots 0-3)"
    )
    assert missing_slot in refusal(stack, "preview", "--policy-pack", str(POLICY_PACK))
    assert missing_slot in refusal(stack, "up", "--yes", "--policy-pack", str(POLICY_PACK))
    assert scheduling_spec(client, namespace) == before

    stack("config", "set", "jobs", slot_jobs({"wordcount": [0, 1], "sorting": [2]}))
    unknown_job = (
        f"Scheduling {namespace}/nightly: spec.slotBased.jobs[1].name: "
        f"BatchJob {namespace}/sorting is not declared in this stack"
    )
    assert unknown_job in refusal(stack, "up", "--yes", "--policy-pack", str(POLICY_PACK))
    assert scheduling_spec(client, namespace) == before


def test_a_resource_policy_refuses_even_an_update_without_preview(
    stack: Pulumi, client: Client, namespace: str
) -> None:
    stack("up", "--yes", "--policy-pack", str(POLICY_PACK))
    before = scheduling_spec(client, namespace)

    stack("config", "set", "jobs", slot_jobs({"wordcount": [0, 1], "pagerank": [1, 2]}))
    refused = refusal(stack, "up", "--yes", "--skip-preview", "--policy-pack", str(POLICY_PACK))

    assert (
        f"Scheduling {namespace}/nightly: spec.slotBased.jobs[1].slotIds: slot 1 is also listed for jobs[0] (wordcount)"
    ) in refused
    assert scheduling_spec(client, namespace) == before


def test_without_the_pack_the_bad_scheduling_would_be_applied(stack: Pulumi, client: Client, namespace: str) -> None:
    """The refusals above are the pack's: the API server itself accepts a slot id no Testbed has."""
    stack("config", "set", "jobs", slot_jobs({"wordcount": [0, 1], "pagerank": [2, 99]}))
    stack("up", "--yes")

    _, spec = scheduling_spec(client, namespace)
    assert [job["slotIds"] for job in spec["slotBased"]["jobs"]] == [[0, 1], [2, 99]]


def test_a_batchjob_that_could_never_run_is_refused_by_the_pack_and_by_the_api_server(
    stack: Pulumi, namespace: str
) -> None:
    stack("config", "set", "account", "none")  # wordcount's driver names no ServiceAccount

    by_the_pack = refusal(stack, "preview", "--policy-pack", str(POLICY_PACK))
    by_the_api_server = refusal(stack, "up", "--yes")

    assert f"BatchJob {namespace}/wordcount: spec.sparkSpec.driver.serviceAccount: set driver.serviceAccount" in (
        by_the_pack
    )
    assert "spec.sparkSpec.driver.serviceAccount" in by_the_api_server
    assert "set driver.serviceAccount (e.g. driver: {serviceAccount: spark})" in by_the_api_server
