"""The policy pack's rules, called directly on plain manifests, and the shell that feeds them Pulumi's resources."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from esi.objects.names import EXECUTOR_PRIORITY_CLASS, GHOST_PRIORITY_CLASS
from esi.objects.priority import priority_classes
from infra.stacks.second_scheduler import SecondSchedulerSettings, scheduler_configuration
from policies import pack, rules
from policies.rules import KubeObject, ObjectKey, Stack, Violation

GROUP_VERSION = "esi.tu-berlin.de/v1alpha1"
LABEL = "esi.test/slots"
Manifest = dict[str, Any]


# --- builders --------------------------------------------------------------------------------------------


def make_testbed(
    name: str = "tb",
    namespace: str = "demo",
    label: str = LABEL,
    per_node: int = 2,
    cpu: str = "1",
    memory: str = "1Gi",
) -> Manifest:
    spec = {"nodeLabel": label, "slotsPerNode": per_node, "resourcesPerSlot": {"cpu": cpu, "memory": memory}}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "Testbed",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def batchjob(name: str, namespace: str = "demo") -> Manifest:
    spec = {
        "sparkSpec": {"type": "Scala", "mainApplicationFile": "local:///job.jar", "driver": {"serviceAccount": "spark"}}
    }
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "BatchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def greedy_flink_job(name: str) -> Manifest:
    """A Flink BatchJob whose own managed memory leaves a TaskManager of 1 GiB (``make_testbed``'s slots) no heap."""
    conf = {"taskmanager.memory.managed.fraction": "0.9"}
    flink = {"job": {"jarURI": "local:///job.jar"}, "serviceAccount": "flink", "flinkConfiguration": conf}
    return batchjob(name) | {"spec": {"flinkSpec": flink}}


def scheduling(
    *,
    queue: Sequence[str | dict[str, str]] | None = None,
    slots: dict[str, list[int]] | None = None,
    testbed_ref: dict[str, str] | None = None,
    name: str = "nightly",
    namespace: str = "demo",
) -> Manifest:
    spec: dict[str, Any] = {"testbed": testbed_ref or {"name": "tb"}}
    if queue is not None:
        spec["queueBased"] = [{"name": entry} if isinstance(entry, str) else entry for entry in queue]
    if slots is not None:
        spec["slotBased"] = {
            "mode": "strict",
            "jobs": [{"name": {"name": j}, "slotIds": ids} for j, ids in slots.items()],
        }
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "Scheduling",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def named_as_slots(manifest: Manifest) -> Manifest:
    """A Scheduling naming its Testbed ``slots``, as manifests written for the original ESI do."""
    spec = {key: value for key, value in manifest["spec"].items() if key != "testbed"}
    return manifest | {"spec": spec | {"slots": manifest["spec"]["testbed"]}}


def node(name: str, node_id: str | None = None, *, cpu: str | None = "4", memory: str = "8Gi") -> Manifest:
    manifest: Manifest = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}}
    if node_id is not None:
        manifest["metadata"]["labels"][LABEL] = node_id
    if cpu is not None:
        manifest["status"] = {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}
    return manifest


def nodes(count: int, **resources: str) -> list[Manifest]:
    return [node(f"n{i}", str(i), **resources) for i in range(count)]


def priority_class(name: str, value: int) -> Manifest:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def config_map(data: dict[str, str], name: str = "esi-scheduler") -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "esi-system"},
        "data": data,
    }


def obj(manifest: Manifest) -> KubeObject:
    found = rules.kube_object(manifest)
    assert found is not None
    return found


def stack(*manifests: Manifest) -> Stack:
    return rules.stack_of(obj(m) for m in manifests)


def messages(violations: list[Violation]) -> list[str]:
    return [v.message for v in violations]


GOOD = (make_testbed(), batchjob("wordcount"), batchjob("pagerank"), *nodes(3))


def check_stack(rule: Callable[[Stack], list[Violation]], manifests: tuple[Manifest, ...]) -> list[str]:
    return messages(rule(stack(*manifests)))


# --- reading resources -----------------------------------------------------------------------------------


def test_a_custom_resource_is_read_from_its_properties() -> None:
    found = rules.kube_object(make_testbed(), "kubernetes:esi.tu-berlin.de/v1alpha1:Testbed")

    assert found is not None
    assert found.key == ObjectKey("Testbed", "demo", "tb")
    assert str(found.key) == "Testbed demo/tb"
    assert found.is_esi("Testbed")


def test_the_type_token_names_the_kind_when_the_properties_do_not() -> None:
    found = rules.kube_object({"metadata": {"name": "n0", "labels": {LABEL: "0"}}}, "kubernetes:core/v1:NodePatch")

    assert found is not None
    assert (found.api_version, found.key) == ("v1", ObjectKey("Node", None, "n0"))
    assert str(found.key) == "Node n0"


def test_numbers_pulumi_sends_as_floats_are_integers_again() -> None:
    manifest = scheduling(slots={"wordcount": [0, 1]})
    manifest["spec"]["slotBased"]["jobs"][0]["slotIds"] = [0.0, 1.0]

    found = obj(manifest)

    assert found.spec["slotBased"]["jobs"][0]["slotIds"] == [0, 1]
    assert all(type(i) is int for i in found.spec["slotBased"]["jobs"][0]["slotIds"])


def test_a_namespaced_object_without_namespace_goes_to_the_default_namespace() -> None:
    manifest = batchjob("wordcount")
    del manifest["metadata"]["namespace"]

    assert obj(manifest).key.namespace == "default"
    assert rules.kube_object(manifest, default_namespace="team-a") == KubeObject(
        ObjectKey("BatchJob", "team-a", "wordcount"), GROUP_VERSION, manifest
    )


@pytest.mark.parametrize(
    ("resource_type", "props"),
    [
        pytest.param("pulumi:pulumi:Stack", {}, id="the stack"),
        pytest.param("pulumi:providers:kubernetes", {"kubeconfig": "/k"}, id="a provider"),
        pytest.param("kubernetes:yaml/v2:ConfigGroup", {}, id="a config group (its children are resources)"),
        pytest.param("kubernetes:core/v1:ConfigMap", {"metadata": {}}, id="a name not known yet"),
    ],
)
def test_resources_that_declare_no_named_object_are_not_objects(resource_type: str, props: Manifest) -> None:
    assert rules.kube_object(props, resource_type) is None


def test_a_node_declared_and_patched_is_one_node_with_what_both_know() -> None:
    created = node("n0", cpu="4")
    patch = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "labels": {LABEL: "0"}}}

    (merged,) = stack(created, patch).nodes

    assert merged.name == "n0"
    assert merged.labels == {LABEL: "0"}
    assert merged.allocatable is not None
    assert str(merged.allocatable["cpu"]) == "4"


def test_the_local_stacks_node_pool_declares_its_kwok_nodes() -> None:
    # infra.stacks.local's NodePool: a dynamic resource, its nodes as name, cpu, memory and labels.
    listed = [
        {"name": "n0", "cpu": "4", "memory": "8Gi", "labels": {LABEL: "0"}},
        {"name": "n1", "cpu": "2", "memory": "8Gi", "labels": {LABEL: "1"}},
    ]
    pool = rules.resource_object("pulumi-python:dynamic:Resource", "esi-nodes", {"nodes": listed}, "default")
    local = rules.stack_of([obj(make_testbed(per_node=3)), pool, obj(scheduling(slots={"wordcount": [6]}))])

    assert messages(rules.scheduling_slots_exist(local)) == [
        "Scheduling demo/nightly on Testbed demo/tb: job 'wordcount' lists slot 6, which testbed does not have "
        "(it has slots 0-5)"
    ]
    assert messages(rules.testbed_fits_nodes(local)) == [
        "Testbed demo/tb: spec.resourcesPerSlot.cpu: 3 slots of 1 need 3, more than the allocatable cpu of node n1 (2)"
    ]


def test_a_node_without_allocatable_uses_its_capacity() -> None:
    manifest = node("n0", "0", cpu=None)
    manifest["status"] = {"capacity": {"cpu": "2", "memory": "1Gi"}}

    (known,) = stack(manifest).nodes

    assert known.allocatable is not None
    assert str(known.allocatable["cpu"]) == "2"


# --- 1. the Testbed exists -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param((*GOOD, scheduling(queue=["wordcount"])), [], id="declared in its own namespace"),
        pytest.param(
            (
                make_testbed(namespace="shared"),
                scheduling(queue=["wordcount"], testbed_ref={"name": "tb", "namespace": "shared"}),
            ),
            [],
            id="declared in the namespace the reference names",
        ),
        pytest.param(
            (scheduling(queue=["wordcount"]),),
            [
                "Scheduling demo/nightly: spec.testbed: Testbed demo/tb is not declared in this stack "
                "(the policy pack sees only the stack's resources)"
            ],
            id="not declared",
        ),
        pytest.param(
            (make_testbed(namespace="other"), scheduling(queue=["wordcount"])),
            [
                "Scheduling demo/nightly: spec.testbed: Testbed demo/tb is not declared in this stack "
                "(the policy pack sees only the stack's resources)"
            ],
            id="a Testbed of that name in another namespace",
        ),
        pytest.param(
            (*GOOD, named_as_slots(scheduling(queue=["wordcount"]))), [], id="declared, named as the original's slots"
        ),
        pytest.param(
            (named_as_slots(scheduling(queue=["wordcount"])),),
            [
                "Scheduling demo/nightly: spec.slots: Testbed demo/tb is not declared in this stack "
                "(the policy pack sees only the stack's resources)"
            ],
            id="not declared, named as the original's slots",
        ),
    ],
)
def test_a_scheduling_names_a_testbed_of_the_stack(manifests: tuple[Manifest, ...], expected: list[str]) -> None:
    assert check_stack(rules.scheduling_testbed_exists, manifests) == expected


# --- 2. the BatchJobs exist ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_list", "expected"),
    [
        pytest.param(scheduling(queue=["wordcount", "pagerank", "wordcount"]), [], id="queue of declared jobs"),
        pytest.param(scheduling(slots={"wordcount": [0], "pagerank": [1]}), [], id="slot jobs declared"),
        pytest.param(
            scheduling(queue=["wordcount", "sorting", "sorting"]),
            ["Scheduling demo/nightly: spec.queueBased[1]: BatchJob demo/sorting is not declared in this stack"],
            id="an unknown queued job is reported once, where it first appears",
        ),
        pytest.param(
            scheduling(slots={"wordcount": [0], "sorting": [1]}),
            [
                "Scheduling demo/nightly: spec.slotBased.jobs[1].name: "
                "BatchJob demo/sorting is not declared in this stack"
            ],
            id="an unknown slot job",
        ),
        pytest.param(
            scheduling(queue=[{"name": "wordcount", "namespace": "other"}]),
            ["Scheduling demo/nightly: spec.queueBased[0]: BatchJob other/wordcount is not declared in this stack"],
            id="a job of that name in another namespace",
        ),
    ],
)
def test_a_scheduling_names_only_batchjobs_of_the_stack(job_list: Manifest, expected: list[str]) -> None:
    assert check_stack(rules.scheduling_jobs_exist, (*GOOD, job_list)) == expected


# --- 3. the Scheduling can be placed on its Testbed ----------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param((*GOOD, scheduling(slots={"wordcount": [0, 5], "pagerank": [3]})), [], id="every id below 6"),
        pytest.param(
            (*GOOD, scheduling(slots={"wordcount": [0, 1], "pagerank": [9]})),
            [
                "Scheduling demo/nightly on Testbed demo/tb: job 'pagerank' lists slot 9, which testbed does not "
                "have (it has slots 0-5)"
            ],
            id="3 nodes x 2 slots have no slot 9",
        ),
        pytest.param(
            (*GOOD, scheduling(slots={"wordcount": [12, 6, 1]})),
            [
                "Scheduling demo/nightly on Testbed demo/tb: job 'wordcount' lists slots 6 and 12, which testbed "
                "does not have (it has slots 0-5)"
            ],
            id="several missing ids, in order",
        ),
        pytest.param(
            (
                make_testbed(),
                batchjob("wordcount"),
                node("n0", "0"),
                node("odd", "zero"),
                scheduling(slots={"wordcount": [2]}),
            ),
            [
                "Scheduling demo/nightly on Testbed demo/tb: job 'wordcount' lists slot 2, which testbed does not "
                "have (it has slots 0-1)"
            ],
            id="a node whose label is no node id holds no slots",
        ),
        pytest.param(
            (make_testbed(per_node=1), batchjob("wordcount"), node("n0", "0"), scheduling(slots={"wordcount": [1]})),
            [
                "Scheduling demo/nightly on Testbed demo/tb: job 'wordcount' lists slot 1, which testbed does not "
                "have (it has slot 0)"
            ],
            id="a Testbed of one slot",
        ),
        pytest.param(
            (*GOOD, scheduling(queue=["wordcount"] * 6 + ["pagerank"] * 7)),
            ["Scheduling demo/nightly on Testbed demo/tb: job 'pagerank' needs 7 slots but testbed has 6"],
            id="a queued job with more executors than slots",
        ),
        pytest.param(
            (*GOOD, scheduling(queue=["wordcount", "pagerank"] * 4)),
            [
                "Scheduling demo/nightly on Testbed demo/tb: jobs 'wordcount' and 'pagerank' can never start: once "
                "every job that can start has run, the queue is [wordcount, pagerank, wordcount, pagerank, wordcount, "
                "pagerank, wordcount, pagerank], and even with all 6 slots of the testbed free each of them has an "
                "entry at position 6 or later, which maps to no slot"
            ],
            id="queued jobs that wait for each other forever",
        ),
        pytest.param(
            (
                make_testbed(namespace="shared"),
                *GOOD[1:],
                scheduling(queue=["wordcount"], testbed_ref={"name": "tb", "namespace": "shared"}),
            ),
            [
                "Scheduling demo/nightly on Testbed shared/tb: references outside namespace demo are not supported: "
                "shared/tb"
            ],
            id="a Testbed of another namespace",
        ),
        pytest.param(
            (make_testbed(), batchjob("wordcount"), scheduling(slots={"wordcount": [99]})),
            [],
            id="no node known: not checked here",
        ),
        pytest.param(
            (*GOOD, greedy_flink_job("wordcount"), scheduling(queue=["wordcount", "pagerank"])),
            [
                "Scheduling demo/nightly on Testbed demo/tb: job wordcount can never run in testbed tb's slots: "
                "BatchJob wordcount: resourcesPerSlot.memory of testbed tb is 1024 MiB, and a TaskManager of 1024 MiB "
                "cannot start: of its Flink memory (576 MiB, after JVM metaspace and overhead), framework heap "
                "128 MiB, framework off-heap 128 MiB, task off-heap 0 MiB, managed 518.4 MiB, network 64 MiB leave "
                "no task heap; "
                "no slot is large enough: lower or leave out "
                "spec.flinkSpec.flinkConfiguration[\"taskmanager.memory.managed.fraction\"] ('0.9'), which esi keeps "
                "as written"
            ],
            id="a job that could never run in the Testbed's slots",
        ),
        pytest.param((*nodes(3), scheduling(slots={"wordcount": [99]})), [], id="no Testbed: rule 1 reports it"),
    ],
)
def test_a_scheduling_can_be_placed_on_its_testbed_as_esi_places_it(
    manifests: tuple[Manifest, ...], expected: list[str]
) -> None:
    assert check_stack(rules.scheduling_slots_exist, manifests) == expected


# --- 4. no slot twice ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        pytest.param(scheduling(slots={"wordcount": [0, 1], "pagerank": [2, 3]}), [], id="distinct slots"),
        pytest.param(scheduling(queue=["wordcount", "wordcount"]), [], id="a queue names no slots"),
        pytest.param(
            scheduling(slots={"wordcount": [0, 1], "pagerank": [1, 2]}),
            ["Scheduling demo/nightly: spec.slotBased.jobs[1].slotIds: slot 1 is also listed for jobs[0] (wordcount)"],
            id="a slot of another job",
        ),
        pytest.param(
            scheduling(slots={"wordcount": [4, 0, 4]}),
            ["Scheduling demo/nightly: spec.slotBased.jobs[0].slotIds: slot 4 is listed twice"],
            id="a slot twice in one job",
        ),
        pytest.param(make_testbed(), [], id="not a Scheduling"),
    ],
)
def test_a_scheduling_lists_every_slot_once(manifest: Manifest, expected: list[str]) -> None:
    assert messages(rules.scheduling_slots_distinct(obj(manifest))) == expected


# --- 5. slots fit the nodes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param((make_testbed(per_node=4, cpu="1", memory="2Gi"), *nodes(2)), [], id="exactly the allocatable"),
        pytest.param(
            (make_testbed(per_node=3, cpu="1500m"), node("n0", "0", cpu="4"), node("n1", "1", cpu="8")),
            [
                "Testbed demo/tb: spec.resourcesPerSlot.cpu: 3 slots of 1500m need 4500m, more than the allocatable "
                "cpu of node n0 (4)"
            ],
            id="cpu of one node too small",
        ),
        pytest.param(
            (make_testbed(per_node=2, memory="5Gi"), node("n0", "0", memory="8Gi")),
            [
                "Testbed demo/tb: spec.resourcesPerSlot.memory: 2 slots of 5Gi need 10Gi, more than the allocatable "
                "memory of node n0 (8Gi)"
            ],
            id="memory too small",
        ),
        pytest.param((make_testbed(per_node=2, cpu="64"), node("n0", "0", cpu=None)), [], id="allocatable unknown"),
        pytest.param((make_testbed(per_node=2, cpu="64"), node("n0")), [], id="a node without the label"),
    ],
)
def test_a_testbeds_slots_fit_its_nodes(manifests: tuple[Manifest, ...], expected: list[str]) -> None:
    assert check_stack(rules.testbed_fits_nodes, manifests) == expected


# --- 6. distinct node labels -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param((make_testbed("a", label="x/a"), make_testbed("b", label="x/b")), [], id="labels differ"),
        pytest.param(
            (make_testbed("b"), make_testbed("a")),
            [
                f"Testbed demo/b: spec.nodeLabel: {LABEL} is also the node label of Testbed demo/a; "
                "two Testbeds cannot both hold those nodes' slots"
            ],
            id="same namespace",
        ),
        pytest.param(
            (make_testbed("tb", namespace="team-a"), make_testbed("tb", namespace="team-b")),
            [
                f"Testbed team-b/tb: spec.nodeLabel: {LABEL} is also the node label of Testbed team-a/tb; "
                "two Testbeds cannot both hold those nodes' slots"
            ],
            id="nodes are cluster-wide: across namespaces too",
        ),
    ],
)
def test_no_two_testbeds_share_a_node_label(manifests: tuple[Manifest, ...], expected: list[str]) -> None:
    assert check_stack(rules.distinct_node_labels, manifests) == expected


# --- 7. ghost below executor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param(tuple(priority_classes()), [], id="esi's own priority classes"),
        pytest.param((priority_class(GHOST_PRIORITY_CLASS, 5),), [], id="only the ghost class: nothing to compare"),
        pytest.param(
            (priority_class(GHOST_PRIORITY_CLASS, 2_000_000), priority_class(EXECUTOR_PRIORITY_CLASS, 1_000_000)),
            [
                "PriorityClass esi-ghost: value: 2000000 is not below the value of PriorityClass esi-executor "
                "(1000000); executor pods could not evict ghost pods"
            ],
            id="swapped",
        ),
        pytest.param(
            (priority_class(GHOST_PRIORITY_CLASS, 7), priority_class(EXECUTOR_PRIORITY_CLASS, 7)),
            [
                "PriorityClass esi-ghost: value: 7 is not below the value of PriorityClass esi-executor (7); "
                "executor pods could not evict ghost pods"
            ],
            id="equal",
        ),
        pytest.param(
            (priority_class(GHOST_PRIORITY_CLASS, 0), priority_class(EXECUTOR_PRIORITY_CLASS, 10)),
            [
                "PriorityClass esi-ghost: value: 0 is not above ordinary workloads (0); "
                "ordinary pods could evict ghost pods"
            ],
            id="ghosts no higher than ordinary pods",
        ),
    ],
)
def test_ghosts_rank_between_ordinary_pods_and_executors(manifests: tuple[Manifest, ...], expected: list[str]) -> None:
    assert check_stack(rules.ghost_below_executor, manifests) == expected


# --- 8. the second scheduler scores every node -----------------------------------------------------------

ESI_CONFIGURATION = scheduler_configuration(SecondSchedulerSettings("esi-scheduler", "http://esi/extender"), None)
HALF = {**ESI_CONFIGURATION, "percentageOfNodesToScore": 50}
UNSET = {k: v for k, v in ESI_CONFIGURATION.items() if k != "percentageOfNodesToScore"}
PROFILE_OVERRIDE = {
    **ESI_CONFIGURATION,
    "profiles": [{"schedulerName": "esi-scheduler", "percentageOfNodesToScore": 30}],
}
CONSEQUENCE = "must be 100: else, above 100 nodes, the node of a slot may never be offered to esi's extender"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        pytest.param(config_map({"config.yaml": yaml.safe_dump(ESI_CONFIGURATION)}), [], id="esi's configuration"),
        pytest.param(config_map({"greeting": "hello"}), [], id="a ConfigMap of something else"),
        pytest.param(
            config_map({"config.yaml": yaml.safe_dump(HALF)}),
            [f"ConfigMap esi-system/esi-scheduler: data[config.yaml].percentageOfNodesToScore: 50, {CONSEQUENCE}"],
            id="50 percent, as YAML",
        ),
        pytest.param(
            config_map({"config": json.dumps(UNSET)}),
            [f"ConfigMap esi-system/esi-scheduler: data.config.percentageOfNodesToScore: not set, {CONSEQUENCE}"],
            id="not set, as JSON",
        ),
        pytest.param(
            config_map({"config.yaml": yaml.safe_dump(PROFILE_OVERRIDE)}),
            [
                "ConfigMap esi-system/esi-scheduler: data[config.yaml].profiles[0].percentageOfNodesToScore: 30, "
                "must be 100 or unset (it overrides the global value for this profile)"
            ],
            id="a profile overrides it",
        ),
    ],
)
def test_the_second_scheduler_scores_every_node(manifest: Manifest, expected: list[str]) -> None:
    assert messages(rules.scheduler_scores_every_node(obj(manifest))) == expected


def test_a_scheduler_configuration_is_found_in_any_resource_that_carries_it() -> None:
    carrier = rules.resource_object(
        "pulumi-python:dynamic:Resource", "esi-scheduler", {"configuration": HALF}, "default"
    )

    assert messages(rules.scheduler_scores_every_node(carrier)) == [
        f"pulumi-python:dynamic:Resource esi-scheduler: configuration.percentageOfNodesToScore: 50, {CONSEQUENCE}"
    ]


# --- advisory: what could not be checked -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifests", "expected"),
    [
        pytest.param((*GOOD, scheduling(slots={"wordcount": [0]})), [], id="everything known"),
        pytest.param(
            (make_testbed(), scheduling(slots={"wordcount": [99]})),
            [
                f"Testbed demo/tb: spec.nodeLabel: no node labelled {LABEL} is declared in this stack; "
                "its slot ids and slot size are not checked",
                "Scheduling demo/nightly: spec.testbed: slot ids are not checked: Testbed demo/tb has no slot on a "
                "node declared in this stack",
            ],
            id="no node with the label",
        ),
        pytest.param(
            (make_testbed(), node("n0", "0", cpu=None)),
            [
                "Testbed demo/tb: spec.resourcesPerSlot: node n0's allocatable resources are not known to the stack "
                "(yet); the slot size is not checked against it"
            ],
            id="a node whose allocatable is not known yet",
        ),
        pytest.param(
            (make_testbed(), node("n0", "0"), node("n1", "first")),
            [
                f"Testbed demo/tb: spec.nodeLabel: node n1 is left out: its label {LABEL}='first' is not a "
                "non-negative integer node id"
            ],
            id="a label value that is no node id",
        ),
    ],
)
def test_what_could_not_be_checked_is_reported(manifests: tuple[Manifest, ...], expected: list[str]) -> None:
    assert check_stack(rules.unchecked_testbeds, manifests) == expected


# --- the pack: pulumi_policy's resources in, violations out ----------------------------------------------


def test_every_rule_is_one_policy_and_only_the_advisory_one_does_not_block() -> None:
    policies = pack.policies()

    names = [p.name for p in policies]
    assert len(set(names)) == len(names) == len(rules.STACK_RULES) + len(rules.RESOURCE_RULES)
    advisory = {p.name for p in policies if p.enforcement_level == EnforcementLevel.ADVISORY}
    assert advisory == {"testbed-nodes-known"}


def test_values_unknown_in_a_preview_are_none_and_the_rest_is_read() -> None:
    props = unknown_checking_proxy(
        {"metadata": {"name": "nightly", "uid": UNKNOWN_STRING_VALUE}, "spec": {"slotIds": [1, UNKNOWN_NUMBER_VALUE]}}
    )

    assert pack.known(props) == {"metadata": {"name": "nightly", "uid": None}, "spec": {"slotIds": [1, None]}}


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def policy_resource(manifest: Manifest, provider: PolicyProviderResource | None = None) -> PolicyResource:
    api_version, kind, name = manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]
    resource_type = f"kubernetes:{'core/v1' if api_version == 'v1' else api_version}:{kind}"
    props = unknown_checking_proxy(json.loads(json.dumps(manifest)))
    return PolicyResource(
        resource_type, props, f"urn:pulumi:dev::esi::{resource_type}::{name}", name, options(), provider, None, [], {}
    )


def test_a_stack_policy_reports_each_violation_on_the_resource_at_fault() -> None:
    resources = [policy_resource(m) for m in (*GOOD, scheduling(slots={"wordcount": [0], "pagerank": [9]}))]
    (policy,) = [
        p for p in pack.policies() if p.name == "scheduling-slots-exist" and isinstance(p, StackValidationPolicy)
    ]
    reported: list[tuple[str, str | None]] = []

    policy.validate(StackValidationArgs(resources), lambda message, urn: reported.append((message, urn)))

    assert reported == [
        (
            "Scheduling demo/nightly on Testbed demo/tb: job 'pagerank' lists slot 9, which testbed does not have "
            "(it has slots 0-5)",
            f"urn:pulumi:dev::esi::kubernetes:{GROUP_VERSION}:Scheduling::nightly",
        )
    ]


def test_a_resource_policy_checks_the_resources_inputs() -> None:
    manifest = scheduling(slots={"wordcount": [3], "pagerank": [3]})
    del manifest["metadata"]["namespace"]
    provider = PolicyProviderResource("pulumi:providers:kubernetes", {"namespace": "team-a"}, "urn:provider", "k8s")
    resource = policy_resource(manifest, provider)
    args = ResourceValidationArgs(
        resource.resource_type, resource.props, resource.urn, resource.name, options(), provider
    )
    (policy,) = [
        p for p in pack.policies() if p.name == "scheduling-slots-distinct" and isinstance(p, ResourceValidationPolicy)
    ]
    reported: list[str] = []

    policy.validate(args, lambda message, urn: reported.append(message))

    assert reported == [
        "Scheduling team-a/nightly: spec.slotBased.jobs[1].slotIds: slot 3 is also listed for jobs[0] (wordcount)"
    ]


# --- 9. a BatchJob can run --------------------------------------------------------------------------------


def test_a_batchjob_whose_driver_has_no_account_is_refused_at_the_field() -> None:
    manifest = batchjob("wordcount")
    del manifest["spec"]["sparkSpec"]["driver"]

    found = [str(v) for v in rules.batchjob_can_run(obj(manifest))]

    assert len(found) == 1
    assert found[0].startswith(
        "BatchJob demo/wordcount: spec.sparkSpec.driver.serviceAccount: set driver.serviceAccount"
    )


def test_a_batchjob_whose_executors_would_outgrow_any_slot_is_refused_at_the_field() -> None:
    manifest = batchjob("wordcount")
    manifest["spec"]["sparkSpec"]["executor"] = {"sidecars": [{"name": "log", "image": "busybox"}]}

    found = [str(v) for v in rules.batchjob_can_run(obj(manifest))]

    assert len(found) == 1
    assert found[0].startswith("BatchJob demo/wordcount: spec.sparkSpec.executor.sidecars: the operator would give")


def test_a_batchjob_with_a_value_pulumi_does_not_know_yet_is_left_to_the_update() -> None:
    manifest = batchjob("wordcount")
    manifest["spec"]["sparkSpec"]["driver"] = {"serviceAccount": None}

    assert rules.batchjob_can_run(obj(manifest)) == []
    assert rules.batchjob_can_run(obj(batchjob("wordcount"))) == []
