"""The kube-scheduler extender wire format (``k8s.io/kube-scheduler/extender/v1``), as pydantic models.

The scheduler sends Go structs without JSON tags, so the keys are Go's field names (``Pod``,
``NodeNames``, ``NodeNameToMetaVictims``, ``UID``); the pod inside is an ordinary Kubernetes object with
camelCase keys, of which only the parts the extender reads are typed. esi's second scheduler runs with
``nodeCacheCapable: true``: it sends node *names* and, for preemption, victims by UID (``MetaVictims``).
The full-object variants are accepted too, so a misconfigured scheduler gets an answer, not a crash.
A request that does not fit these models is a client error (HTTP 400) naming the field; numbers are strict
(``false`` is not a priority, as Go's decoder would not read it as one).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from esi.resources.meta import MAX_NAME_LENGTH, MAX_NAMESPACE_LENGTH, NAME_PATTERN, NAMESPACE_PATTERN

__all__ = [
    "ExtenderArgs",
    "ExtenderBindingArgs",
    "ExtenderBindingResult",
    "ExtenderFilterResult",
    "ExtenderPreemptionArgs",
    "ExtenderPreemptionResult",
    "MetaPod",
    "MetaVictims",
    "Node",
    "NodeMeta",
    "PodMeta",
    "SchedulingPod",
    "VictimMeta",
    "VictimPod",
    "Victims",
]


class _GoStruct(BaseModel):
    """Keys exactly as Go names its fields; unknown keys (newer schedulers) ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_by_name=True, serialize_by_alias=True)


class _KubeObject(BaseModel):
    """Part of a Kubernetes object: camelCase keys, everything not modelled kept as it came."""

    model_config = ConfigDict(
        extra="allow", frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class PodMeta(_KubeObject):
    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodSpec(_KubeObject):
    node_name: str | None = None
    scheduler_name: str | None = None
    priority: int | None = Field(default=None, strict=True)


class SchedulingPod(_KubeObject):
    """The pod being scheduled (or a victim): what the extender needs to know about it."""

    metadata: PodMeta
    spec: PodSpec = Field(default_factory=PodSpec)


class VictimMeta(PodMeta):
    uid: str = Field(min_length=1)  # victims are evicted, and answered, by UID


class VictimPod(SchedulingPod):
    """A pod the scheduler would evict."""

    metadata: VictimMeta


class NodeMeta(_KubeObject):
    name: str = ""


class Node(_KubeObject):
    """A node sent whole (a scheduler without ``nodeCacheCapable``): only its name is read."""

    metadata: NodeMeta = Field(default_factory=NodeMeta)


class NodeList(_KubeObject):
    items: list[Node] = Field(default_factory=list)

    def names(self) -> list[str]:
        return [item.metadata.name for item in self.items]


class ExtenderArgs(_GoStruct):
    """Filter request: the pod and the nodes that passed the scheduler's own filters."""

    pod: SchedulingPod = Field(alias="Pod")
    nodes: NodeList | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")

    def candidate_nodes(self) -> list[str]:
        """The offered node names, whichever way the scheduler sent them."""
        if self.node_names is not None:
            return list(self.node_names)
        return self.nodes.names() if self.nodes is not None else []


class ExtenderFilterResult(_GoStruct):
    node_names: list[str] | None = Field(default=None, alias="NodeNames")
    failed_nodes: dict[str, str] = Field(default_factory=dict, alias="FailedNodes")
    failed_and_unresolvable_nodes: dict[str, str] = Field(default_factory=dict, alias="FailedAndUnresolvableNodes")
    error: str = Field(default="", alias="Error")


class MetaPod(_GoStruct):
    uid: str = Field(alias="UID", min_length=1)


class MetaVictims(_GoStruct):
    pods: list[MetaPod] = Field(default_factory=list, alias="Pods")
    num_pdb_violations: int = Field(default=0, alias="NumPDBViolations", strict=True)


class Victims(_GoStruct):
    pods: list[VictimPod] = Field(default_factory=list, alias="Pods")
    num_pdb_violations: int = Field(default=0, alias="NumPDBViolations", strict=True)


class ExtenderPreemptionArgs(_GoStruct):
    """Preempt request: the pod and, per candidate node, the victims the scheduler would evict there."""

    pod: SchedulingPod = Field(alias="Pod")
    node_name_to_victims: dict[str, Victims] | None = Field(default=None, alias="NodeNameToVictims")
    node_name_to_meta_victims: dict[str, MetaVictims] | None = Field(default=None, alias="NodeNameToMetaVictims")

    def candidate_nodes(self) -> list[str]:
        if self.node_name_to_meta_victims is not None:
            return sorted(self.node_name_to_meta_victims)
        return sorted(self.node_name_to_victims or {})


class ExtenderPreemptionResult(_GoStruct):
    """Per node, the victims the extender agrees to; a node left out is not to be used."""

    node_name_to_meta_victims: dict[str, MetaVictims] = Field(default_factory=dict, alias="NodeNameToMetaVictims")


class ExtenderBindingArgs(_GoStruct):
    """Bind request: the pod the scheduler placed, and where."""

    # Both go into the API server's URLs: only object names are accepted.
    pod_name: str = Field(alias="PodName", min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)
    pod_namespace: str = Field(
        alias="PodNamespace", min_length=1, max_length=MAX_NAMESPACE_LENGTH, pattern=NAMESPACE_PATTERN
    )
    pod_uid: str = Field(default="", alias="PodUID")
    node: str = Field(alias="Node", min_length=1)


class ExtenderBindingResult(_GoStruct):
    """Empty on success; else why the pod is not bound (the scheduler then tries it again)."""

    error: str = Field(default="", alias="Error")
