"""The rules of esi's CrossGuard policy pack, as pure functions over plain Kubernetes manifests.

What the pack sees is the stack's resources, nothing else: it never asks the cluster. A Testbed, BatchJob,
Node or PriorityClass applied outside the stack is therefore unknown here — a Scheduling that names a
Testbed the stack does not declare is refused, even if someone applied that Testbed by hand. Declare what
a Scheduling needs in the same stack (esi's GitOps manifests directory is part of it).

Every Kubernetes object reaches the rules as a ``KubeObject``: its ``apiVersion``/``kind`` (from the
resource's properties, or else its Pulumi type token ``kubernetes:<group>/<version>:<Kind>``), its key
(kind, namespace, name) and its manifest with camelCase keys, as Pulumi resource properties look. Objects
declared with ``apiextensions.CustomResource``, a typed resource (``core.v1.Node``, ``NodePatch``, ...) or
``yaml/v2`` ``ConfigGroup``/``ConfigFile`` (whose children are registered one by one with the object's
own type) all look the same. Other resources (the local stack's dynamic resources) are stand-ins keyed
by their Pulumi type and name, whose properties some rules still read. A value Pulumi cannot know yet
(during a preview) arrives as ``None`` and counts as absent: the rule that needs it says nothing, the
update's own check sees the final value.

Stack rules (``STACK_RULES``) look at the whole stack; resource rules (``RESOURCE_RULES``) look at one
object, so the engine can refuse it before it is sent to the cluster. Each returns ``Violation``s whose
message names the object and the field, e.g.
``Scheduling demo/nightly: spec.slotBased.jobs[1].slotIds: slot 1 is also listed for jobs[0] (wordcount)``;
a Scheduling that cannot be placed on its Testbed says so in the words of esi's own decision, e.g.
``Scheduling demo/nightly on Testbed demo/tb: job 'pagerank' lists slot 9, which testbed does not have (it has
slots 0-5)``. Rules marked advisory report what could not be checked; they never block.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml
from pydantic import ValidationError

from esi.decisions.layout import NodeLabels, layout_slots
from esi.decisions.scheduling_lifecycle import TestbedView, spec_problems
from esi.objects.applications import run_problem
from esi.objects.names import EXECUTOR_PRIORITY_CLASS, GHOST_PRIORITY_CLASS
from esi.resources.batchjob import BatchJob, BatchJobSpec
from esi.resources.meta import GROUP
from esi.resources.quantity import Quantity, QuantityError, parse_quantity
from esi.resources.scheduling import SchedulingSpec, testbed_field
from esi.resources.testbed import TestbedSpec
from esi.wire.rest import field_problems

__all__ = [
    "CLUSTER_SCOPED_KINDS",
    "RESOURCE_RULES",
    "STACK_RULES",
    "KubeObject",
    "Node",
    "ObjectKey",
    "ResourceRule",
    "Stack",
    "StackRule",
    "Violation",
    "batchjob_can_run",
    "distinct_node_labels",
    "ghost_below_executor",
    "kube_object",
    "plain",
    "resource_object",
    "scheduler_scores_every_node",
    "scheduling_jobs_exist",
    "scheduling_slots_distinct",
    "scheduling_slots_exist",
    "scheduling_testbed_exists",
    "stack_of",
    "testbed_fits_nodes",
    "unchecked_testbeds",
]

# The kinds esi's stacks declare that have no namespace (all others are namespaced).
CLUSTER_SCOPED_KINDS: Final = frozenset(
    {"Node", "PriorityClass", "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
)
_SLOT_RESOURCES: Final = ("cpu", "memory")
_SCHEDULER_CONFIGURATION: Final = "KubeSchedulerConfiguration"
_TYPE_TOKEN: Final = re.compile(r"^kubernetes:(?:(?P<group>[^:/]+)/)?(?P<version>[^:/]+):(?P<kind>[A-Za-z0-9]+)$")
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ObjectKey:
    """Which object: its kind, namespace (None for cluster-scoped kinds) and name."""

    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class KubeObject:
    """A resource of the stack as the rules see it: a Kubernetes object (key, apiVersion, manifest as plain
    data with camelCase keys), or a stand-in for a resource that is none (apiVersion ``""``)."""

    key: ObjectKey
    api_version: str
    manifest: Mapping[str, Any]

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def spec(self) -> Mapping[str, Any]:
        return _mapping(self.manifest.get("spec"))

    def is_esi(self, kind: str) -> bool:
        return self.group == GROUP and self.key.kind == kind


@dataclass(frozen=True)
class Violation:
    """One thing wrong (or, from an advisory rule, not checked): the object at fault and what a person reads."""

    subject: ObjectKey
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Node:
    """What the stack knows of a node, merged over every resource that declares or patches it."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Quantity] | None  # None: not known to the stack (e.g. a node not created yet)


@dataclass(frozen=True)
class Stack:
    """The stack's objects, indexed the way the rules look them up."""

    objects: tuple[KubeObject, ...]
    testbeds: Mapping[tuple[str, str], KubeObject]
    batchjobs: frozenset[tuple[str, str]]
    schedulings: tuple[KubeObject, ...]
    nodes: tuple[Node, ...]
    priority_classes: Mapping[str, KubeObject]

    def members(self, testbed: KubeObject) -> list[Node]:
        """The nodes carrying the Testbed's node label."""
        label = testbed.spec.get("nodeLabel")
        return [n for n in self.nodes if isinstance(label, str) and label in n.labels]


@dataclass(frozen=True)
class StackRule:
    """A rule over the whole stack; advisory rules report what they could not check and never block."""

    name: str
    description: str
    check: Callable[[Stack], list[Violation]]
    advisory: bool = False


@dataclass(frozen=True)
class ResourceRule:
    """A rule over one object, run before the engine sends it to the cluster."""

    name: str
    description: str
    check: Callable[[KubeObject], list[Violation]]


def plain(value: Any) -> Any:
    """Resource properties as plain data: dicts, lists, and integers where Pulumi's protobuf sent floats."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def kube_object(
    props: Mapping[str, Any], resource_type: str = "", default_namespace: str = "default"
) -> KubeObject | None:
    """The Kubernetes object a resource declares, or None when it declares none (or no name is known yet).

    ``default_namespace`` is where a namespaced object without ``metadata.namespace`` goes: the namespace
    of the resource's provider, else ``default``.
    """
    manifest = plain(props)
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    token = _TYPE_TOKEN.match(resource_type)
    if token is not None and not (isinstance(api_version, str) and isinstance(kind, str)):
        group = token["group"] if token["group"] != "core" else None
        api_version = f"{group}/{token['version']}" if group else token["version"]
        kind = token["kind"].removesuffix("Patch")
    metadata = _mapping(manifest.get("metadata"))
    name = metadata.get("name")
    if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str)):
        return None
    namespace: str | None = None
    if kind not in CLUSTER_SCOPED_KINDS:
        given = metadata.get("namespace")
        namespace = given if isinstance(given, str) and given else default_namespace
    return KubeObject(ObjectKey(kind, namespace, name), api_version, manifest)


def resource_object(resource_type: str, name: str, props: Mapping[str, Any], default_namespace: str) -> KubeObject:
    """What a resource of the stack is to the rules: the Kubernetes object it declares, or else a stand-in
    keyed by its Pulumi type and name (apiVersion ``""``), whose properties the rules may still read."""
    obj = kube_object(props, resource_type, default_namespace)
    return obj if obj is not None else KubeObject(ObjectKey(resource_type, None, name), "", plain(props))


def stack_of(objects: Iterable[KubeObject]) -> Stack:
    """Index the stack's objects.

    Nodes come from Node objects (``core.v1.Node``, ``NodePatch``, a ConfigGroup's Node: labels from the
    metadata, allocatable from the status, which only the cluster fills in) and from the local stack's
    ``NodePool`` (``infra.stacks.local``, a Pulumi dynamic resource, not a Kubernetes object) whose ``nodes``
    list each KWOK node's name, labels, and cpu and memory (its allocatable). A node several resources
    declare or patch is one node with what they know together.
    """
    objects = tuple(objects)
    testbeds: dict[tuple[str, str], KubeObject] = {}
    batchjobs: set[tuple[str, str]] = set()
    labels: dict[str, dict[str, str]] = {}
    allocatable: dict[str, dict[str, Quantity]] = {}
    priority_classes: dict[str, KubeObject] = {}

    def add_node(name: str, node_labels: Any, resources: Mapping[str, Any]) -> None:
        labels.setdefault(name, {}).update({k: v for k, v in _mapping(node_labels).items() if isinstance(v, str)})
        known = {r: q for r, q in ((r, _quantity(v)) for r, v in resources.items()) if q is not None}
        if known:
            allocatable.setdefault(name, {}).update(known)

    for obj in objects:
        namespace, name = obj.key.namespace or "", obj.key.name
        if obj.is_esi("Testbed"):
            testbeds[(namespace, name)] = obj
        elif obj.is_esi("BatchJob"):
            batchjobs.add((namespace, name))
        elif obj.key.kind == "Node" and obj.api_version == "v1":
            status = _mapping(obj.manifest.get("status"))
            resources = _mapping(status.get("allocatable")) or _mapping(status.get("capacity"))
            add_node(name, _mapping(obj.manifest.get("metadata")).get("labels"), resources)
        elif obj.key.kind == "PriorityClass" and obj.group == "scheduling.k8s.io":
            priority_classes[name] = obj
        elif not obj.api_version:
            for entry in map(_mapping, _sequence(obj.manifest.get("nodes"))):
                if isinstance(entry.get("name"), str):
                    sizes = {r: entry[r] for r in _SLOT_RESOURCES if r in entry}
                    add_node(entry["name"], entry.get("labels"), sizes)
    nodes = tuple(Node(name, labels[name], allocatable.get(name)) for name in sorted(labels))
    schedulings = tuple(o for o in objects if o.is_esi("Scheduling"))
    return Stack(objects, testbeds, frozenset(batchjobs), schedulings, nodes, priority_classes)


# --- Scheduling rules ------------------------------------------------------------------------------------


def scheduling_testbed_exists(stack: Stack) -> list[Violation]:
    """1. A Scheduling's Testbed is declared in the stack."""
    found = []
    for scheduling in stack.schedulings:
        field = testbed_field(scheduling.spec)
        ref = _reference(scheduling.spec.get(field), scheduling)
        if ref is not None and ref not in stack.testbeds:
            found.append(
                _violation(
                    scheduling,
                    f"spec.{field}",
                    f"Testbed {_ref_text(ref)} is not declared in this stack "
                    "(the policy pack sees only the stack's resources)",
                )
            )
    return found


def scheduling_jobs_exist(stack: Stack) -> list[Violation]:
    """2. Every BatchJob a Scheduling names (queue entries, slot jobs) is declared in the stack."""
    found = []
    for scheduling in stack.schedulings:
        reported: set[tuple[str, str]] = set()
        for path, ref in _job_references(scheduling):
            if ref not in stack.batchjobs and ref not in reported:
                reported.add(ref)
                found.append(_violation(scheduling, path, f"BatchJob {_ref_text(ref)} is not declared in this stack"))
    return found


def scheduling_slots_exist(stack: Stack) -> list[Violation]:
    """3. A Scheduling can be placed on its Testbed: what esi would fail it for, by the decision the Scheduling
    reconciler and the API make (``esi.decisions.scheduling_lifecycle.spec_problems``): its slot ids exist, no
    job needs more slots than there are, no queued job waits forever, it names nothing of another namespace, and
    every job of the stack it names could run in the Testbed's slots (e.g. a Flink TaskManager can start in
    their memory).

    The Testbed's slots are ``slotsPerNode`` on every node of the stack carrying its label (``esi.decisions.layout``);
    with no such node known, the slots are not checked here (``unchecked_testbeds`` says so). A spec esi's models
    refuse (or one Pulumi does not know yet) is not checked either: the API server refuses it, or the update's
    own check sees the final value.
    """
    found = []
    for scheduling in stack.schedulings:
        try:
            spec = SchedulingSpec.model_validate(scheduling.spec)
        except ValidationError:
            continue
        testbed = _testbed_of(stack, scheduling)
        slots = _testbed_slots(stack, testbed) if testbed is not None else frozenset()
        view = TestbedView(slots, frozenset()) if slots else None  # what it decides by: the slot ids
        where = f" on Testbed {_ref_text(_key_ref(testbed))}" if testbed is not None and slots else ""
        unrunnable = _unrunnable(stack, scheduling, testbed) if testbed is not None else {}
        for problem in spec_problems(spec, view, scheduling.key.namespace or "", unrunnable):
            found.append(Violation(scheduling.key, f"{scheduling.key}{where}: {problem}"))
    return found


def _unrunnable(stack: Stack, scheduling: KubeObject, testbed: KubeObject) -> dict[str, str]:
    """Why no run of each BatchJob of the stack the Scheduling names could start in its Testbed's slots
    (``esi.objects.applications.run_problem``), for those that could not; a Testbed or job esi's models refuse,
    or one holding values Pulumi does not know yet, is not judged here."""
    try:
        size = None if _holds_unknowns(testbed.spec) else TestbedSpec.model_validate(testbed.spec)
    except ValidationError:
        size = None
    if size is None:
        return {}
    found = {}
    named = {ref for _, ref in _job_references(scheduling) if ref[0] == (scheduling.key.namespace or "")}
    for obj in stack.objects:
        if not obj.is_esi("BatchJob") or _key_ref(obj) not in named or _holds_unknowns(obj.spec):
            continue
        try:
            job = BatchJob.model_validate({"metadata": {"name": obj.key.name}, "spec": obj.spec})
        except ValidationError:
            continue  # refused as it is (batchjob-can-run)
        why = run_problem(job, testbed.key.name, size)
        if why is not None:
            found[obj.key.name] = why
    return found


def scheduling_slots_distinct(obj: KubeObject) -> list[Violation]:
    """4. A Scheduling lists every slot once: one executor per slot, across all its jobs."""
    if not obj.is_esi("Scheduling"):
        return []
    found = []
    owner: dict[int, int] = {}  # slot id -> index of the job that listed it first
    jobs = _sequence(_mapping(obj.spec.get("slotBased")).get("jobs"))
    for index, job in enumerate(jobs):
        path = f"spec.slotBased.jobs[{index}].slotIds"
        for slot in _slot_ids(job):
            first = owner.setdefault(slot, index)
            if first != index:
                other = _mapping(_mapping(jobs[first]).get("name")).get("name")
                found.append(_violation(obj, path, f"slot {slot} is also listed for jobs[{first}] ({other})"))
        found.extend(_violation(obj, path, f"slot {slot} is listed twice") for slot in _repeated(_slot_ids(job)))
    return found


# --- Testbed rules ---------------------------------------------------------------------------------------


def testbed_fits_nodes(stack: Stack) -> list[Violation]:
    """5. ``slotsPerNode`` slots of ``resourcesPerSlot`` fit the allocatable cpu and memory of every labelled node."""
    found = []
    for testbed in stack.testbeds.values():
        per_node = testbed.spec.get("slotsPerNode")
        if not isinstance(per_node, int):
            continue
        sizes = _mapping(testbed.spec.get("resourcesPerSlot"))
        for resource in _SLOT_RESOURCES:
            size = _quantity(sizes.get(resource))
            if size is None:
                continue
            need = size * per_node
            for node in stack.members(testbed):
                available = (node.allocatable or {}).get(resource)
                if available is not None and available < need:
                    found.append(
                        _violation(
                            testbed,
                            f"spec.resourcesPerSlot.{resource}",
                            f"{per_node} slots of {size} need {need}, more than the allocatable {resource} "
                            f"of node {node.name} ({available})",
                        )
                    )
    return found


def distinct_node_labels(stack: Stack) -> list[Violation]:
    """6. No two Testbeds share a node label (nodes are cluster-wide, so across namespaces too)."""
    found = []
    first: dict[str, KubeObject] = {}
    for key in sorted(stack.testbeds):
        testbed = stack.testbeds[key]
        label = testbed.spec.get("nodeLabel")
        if not isinstance(label, str):
            continue
        owner = first.setdefault(label, testbed)
        if owner is not testbed:
            found.append(
                _violation(
                    testbed,
                    "spec.nodeLabel",
                    f"{label} is also the node label of {owner.key}; two Testbeds cannot both hold those nodes' slots",
                )
            )
    return found


def unchecked_testbeds(stack: Stack) -> list[Violation]:
    """Advisory: what the slot and size rules could not check, because the stack does not know the nodes."""
    found = []
    for testbed in stack.testbeds.values():
        label = testbed.spec.get("nodeLabel")
        per_node = testbed.spec.get("slotsPerNode")
        if not isinstance(label, str) or not isinstance(per_node, int) or per_node < 1:
            continue
        members = stack.members(testbed)
        if not members:
            found.append(
                _violation(
                    testbed,
                    "spec.nodeLabel",
                    f"no node labelled {label} is declared in this stack; its slot ids and slot size are not checked",
                )
            )
            continue
        layout = layout_slots([NodeLabels(n.name, n.labels) for n in members], label, per_node)
        found.extend(_violation(testbed, "spec.nodeLabel", problem) for problem in layout.problems)
        found.extend(
            _violation(
                testbed,
                "spec.resourcesPerSlot",
                f"node {node.name}'s allocatable resources are not known to the stack (yet); "
                "the slot size is not checked against it",
            )
            for node in members
            if node.allocatable is None
        )
    for scheduling in stack.schedulings:
        held = _testbed_of(stack, scheduling)
        if held is not None and not _testbed_slots(stack, held):
            found.append(
                _violation(
                    scheduling,
                    f"spec.{testbed_field(scheduling.spec)}",
                    f"slot ids are not checked: Testbed {_ref_text(_key_ref(held))} has no slot on a node "
                    "declared in this stack",
                )
            )
    return found


# --- Cluster-wide settings -------------------------------------------------------------------------------


def ghost_below_executor(stack: Stack) -> list[Violation]:
    """7. The ghost PriorityClass is above ordinary workloads (0) and below the executor PriorityClass."""
    ghost = stack.priority_classes.get(GHOST_PRIORITY_CLASS)
    if ghost is None:
        return []
    found = []
    ghost_value = ghost.manifest.get("value")
    if not isinstance(ghost_value, int):
        return []
    if ghost_value <= 0:
        found.append(
            _violation(
                ghost,
                "value",
                f"{ghost_value} is not above ordinary workloads (0); ordinary pods could evict ghost pods",
            )
        )
    executor = stack.priority_classes.get(EXECUTOR_PRIORITY_CLASS)
    executor_value = executor.manifest.get("value") if executor is not None else None
    if executor is not None and isinstance(executor_value, int) and ghost_value >= executor_value:
        found.append(
            _violation(
                ghost,
                "value",
                f"{ghost_value} is not below the value of {executor.key} ({executor_value}); "
                "executor pods could not evict ghost pods",
            )
        )
    return found


def scheduler_scores_every_node(obj: KubeObject) -> list[Violation]:
    """8. Every KubeSchedulerConfiguration the object carries scores 100% of the nodes.

    Found wherever it is: a ConfigMap's data (YAML or JSON text), or any property that holds it as an
    object or as text — so the cluster stack's ConfigMap and whatever resource the local stack gives the
    configuration to are checked alike. Per profile too: a profile's own value overrides the global one.
    """
    found = []
    for path, config in _scheduler_configurations(obj.manifest, ""):
        score = config.get("percentageOfNodesToScore")
        if score != 100:
            shown = "not set" if score is None else str(score)
            found.append(
                _violation(
                    obj,
                    _field(path, "percentageOfNodesToScore"),
                    f"{shown}, must be 100: else, above 100 nodes, the node of a slot may never be offered "
                    "to esi's extender",
                )
            )
        for index, profile in enumerate(_sequence(config.get("profiles"))):
            own = _mapping(profile).get("percentageOfNodesToScore")
            if own is not None and own != 100:
                found.append(
                    _violation(
                        obj,
                        _field(path, f"profiles[{index}].percentageOfNodesToScore"),
                        f"{own}, must be 100 or unset (it overrides the global value for this profile)",
                    )
                )
    return found


def batchjob_can_run(obj: KubeObject) -> list[Violation]:
    """9. A BatchJob is one esi's model accepts, by the rules the CRD's CEL rules enforce too (a Spark driver's
    and a Flink JobManager's ServiceAccount, one application, the original's Flink fields esi refuses …): one
    that could never run is refused before it is sent, at the field and saying what to write. A spec holding
    a value Pulumi does not know yet is left to the update's own check."""
    if not obj.is_esi("BatchJob") or _holds_unknowns(obj.spec):
        return []
    try:
        BatchJobSpec.model_validate(obj.spec)
    except ValidationError as err:
        return [_violation(obj, p.field, p.problem) for p in field_problems(err, prefix="spec.")]
    return []


STACK_RULES: Final = (
    StackRule(
        "scheduling-testbed-exists", "A Scheduling names a Testbed declared in this stack.", scheduling_testbed_exists
    ),
    StackRule(
        "scheduling-jobs-exist", "A Scheduling names only BatchJobs declared in this stack.", scheduling_jobs_exist
    ),
    StackRule(
        "scheduling-slots-exist",
        "A Scheduling can be placed on its Testbed as esi places it: its slot ids exist, no job needs more slots "
        "than the Testbed has or waits forever, and each of its jobs could run in the Testbed's slots.",
        scheduling_slots_exist,
    ),
    StackRule(
        "testbed-fits-nodes",
        "A Testbed's slots (slotsPerNode of resourcesPerSlot) fit the allocatable cpu and memory of each of its nodes.",
        testbed_fits_nodes,
    ),
    StackRule("testbed-node-labels-distinct", "No two Testbeds share a node label.", distinct_node_labels),
    StackRule(
        "ghost-below-executor",
        "Ghost pods' PriorityClass is above ordinary workloads and below executor pods' PriorityClass.",
        ghost_below_executor,
    ),
    StackRule(
        "testbed-nodes-known",
        "The nodes a Testbed's checks need are declared in this stack (advisory: what could not be checked).",
        unchecked_testbeds,
        advisory=True,
    ),
)

RESOURCE_RULES: Final = (
    ResourceRule(
        "batchjob-can-run",
        "A BatchJob is one esi accepts: its driver or JobManager names a ServiceAccount, and nothing esi refuses.",
        batchjob_can_run,
    ),
    ResourceRule(
        "scheduling-slots-distinct",
        "A Scheduling lists every slot at most once (one executor per slot).",
        scheduling_slots_distinct,
    ),
    ResourceRule(
        "scheduler-scores-all-nodes",
        "esi's second scheduler scores 100% of the nodes (percentageOfNodesToScore: 100).",
        scheduler_scores_every_node,
    ),
)


# --- helpers ---------------------------------------------------------------------------------------------


def _violation(subject: KubeObject, path: str, what: str) -> Violation:
    return Violation(subject.key, f"{subject.key}: {path}: {what}")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _holds_unknowns(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_holds_unknowns(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_unknowns(v) for v in value)
    return value is None


def _sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, Sequence) and not isinstance(value, str | bytes) else []


def _reference(value: Any, referrer: KubeObject) -> tuple[str, str] | None:
    """(namespace, name) of an esi reference ``{name, namespace?}``; the referrer's namespace by default."""
    ref = _mapping(value)
    name, namespace = ref.get("name"), ref.get("namespace")
    if not isinstance(name, str):
        return None
    return (namespace if isinstance(namespace, str) and namespace else referrer.key.namespace or "", name)


def _ref_text(ref: tuple[str, str]) -> str:
    return f"{ref[0]}/{ref[1]}" if ref[0] else ref[1]


def _key_ref(obj: KubeObject) -> tuple[str, str]:
    return (obj.key.namespace or "", obj.key.name)


def _job_references(scheduling: KubeObject) -> list[tuple[str, tuple[str, str]]]:
    """(field path, (namespace, name)) of every BatchJob the Scheduling names, in order."""
    refs = []
    for index, entry in enumerate(_sequence(scheduling.spec.get("queueBased"))):
        ref = _reference(entry, scheduling)
        if ref is not None:
            refs.append((f"spec.queueBased[{index}]", ref))
    for index, job in enumerate(_sequence(_mapping(scheduling.spec.get("slotBased")).get("jobs"))):
        ref = _reference(_mapping(job).get("name"), scheduling)
        if ref is not None:
            refs.append((f"spec.slotBased.jobs[{index}].name", ref))
    return refs


def _testbed_of(stack: Stack, scheduling: KubeObject) -> KubeObject | None:
    ref = _reference(scheduling.spec.get(testbed_field(scheduling.spec)), scheduling)
    return stack.testbeds.get(ref) if ref is not None else None


def _testbed_slots(stack: Stack, testbed: KubeObject) -> frozenset[int]:
    """The ids of the Testbed's slots on the nodes the stack declares."""
    label, per_node = testbed.spec.get("nodeLabel"), testbed.spec.get("slotsPerNode")
    if not isinstance(label, str) or not isinstance(per_node, int) or per_node < 1:
        return frozenset()
    members = [NodeLabels(n.name, n.labels) for n in stack.members(testbed)]
    return frozenset(slot.id for slot in layout_slots(members, label, per_node).slots)


def _slot_ids(job: Any) -> list[int]:
    return [i for i in _sequence(_mapping(job).get("slotIds")) if isinstance(i, int) and not isinstance(i, bool)]


def _repeated(ids: Sequence[int]) -> list[int]:
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def _quantity(value: Any) -> Quantity | None:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _field(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _scheduler_configurations(value: Any, path: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(field path, configuration) of every KubeSchedulerConfiguration in ``value``, object or text."""
    if isinstance(value, Mapping):
        if value.get("kind") == _SCHEDULER_CONFIGURATION:
            yield path, value
            return
        for key, item in value.items():
            step = _field(path, key) if _IDENTIFIER.match(key) else f"{path}[{key}]"
            yield from _scheduler_configurations(item, step)
    elif isinstance(value, str):
        if _SCHEDULER_CONFIGURATION in value:
            try:
                documents = list(yaml.safe_load_all(value))
            except yaml.YAMLError:
                return
            for document in documents:
                yield from _scheduler_configurations(document, path)
    else:
        for index, item in enumerate(_sequence(value)):
            yield from _scheduler_configurations(item, f"{path}[{index}]")
