"""Testbed: slots of one fixed size on every node that carries a label, held by ghost pods until used.

A node belongs to the Testbed when it has the label ``spec.nodeLabel``; the label's value, an integer, is
the node's id and orders the slots (see ``esi.decisions.layout``). ``status`` is written by the Testbed reconciler
alone, from what it observes (nodes, ghost and executor pods) and the reservations Schedulings record.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from esi.resources.meta import API_VERSION, EsiModel, ObjectMeta, ReconciledStatus
from esi.resources.quantity import Quantity

__all__ = [
    "LABEL_KEY_PATTERN",
    "MAX_SLOTS",
    "ResourcesPerSlot",
    "Slot",
    "SlotCounts",
    "SlotState",
    "Testbed",
    "TestbedSpec",
    "TestbedState",
    "TestbedStatus",
    "Toleration",
    "TolerationOperator",
]

# A Kubernetes label key: optional DNS-subdomain prefix and a name of at most 63 characters.
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_SLOTS = 4096


class ResourcesPerSlot(EsiModel):
    """The size of one slot: what each ghost pod and each executor requests (and is limited to)."""

    cel_rules: ClassVar = (
        {
            "rule": "quantity(string(self.cpu)).isGreaterThan(quantity('0'))",
            "message": "cpu must be positive",
            "fieldPath": ".cpu",
        },
        {
            "rule": "quantity(string(self.memory)).isGreaterThan(quantity('0'))",
            "message": "memory must be positive",
            "fieldPath": ".memory",
        },
    )

    cpu: Quantity
    memory: Quantity

    @field_validator("cpu", "memory")
    @classmethod
    def _positive(cls, size: Quantity) -> Quantity:
        if not size.is_positive:
            raise ValueError(f"must be positive, got {size}")
        return size


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class Toleration(EsiModel):
    """A taint of the Testbed's nodes that its ghosts and executors tolerate, as a Pod's toleration says it."""

    cel_rules: ClassVar = (
        {
            "rule": "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
            "message": "value must be empty when operator is Exists",
            "fieldPath": ".value",
        },
        {
            "rule": "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
            "message": "operator must be Exists when key is empty (to tolerate every taint)",
            "fieldPath": ".operator",
        },
    )

    key: str | None = Field(default=None, max_length=317, description="The taint's key; empty: every key.")
    operator: TolerationOperator | None = Field(
        default=None, validate_default=True, description="Exists or Equal (the default)."
    )
    value: str | None = Field(default=None, max_length=63, description="The taint's value (operator Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint's effect; empty: every effect."
    )
    toleration_seconds: int | None = Field(
        default=None, description="NoExecute only: how long a pod stays once the taint appears; absent: for ever."
    )

    @field_validator("operator")
    @classmethod
    def _exists_without_key(
        cls, operator: TolerationOperator | None, info: ValidationInfo
    ) -> TolerationOperator | None:
        if not info.data.get("key") and operator != TolerationOperator.EXISTS:
            raise ValueError("operator must be Exists when key is empty (to tolerate every taint)")
        return operator

    @field_validator("value")
    @classmethod
    def _no_value_with_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("operator") == TolerationOperator.EXISTS:
            raise ValueError("value must be empty when operator is Exists")
        return value

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """Whether this toleration matches a taint, by Kubernetes' rules."""
        if self.effect is not None and self.effect != effect:
            return False
        if not self.key:
            return True  # operator Exists, checked above
        if self.key != key:
            return False
        return self.operator == TolerationOperator.EXISTS or (self.value or "") == value


class TestbedSpec(EsiModel):
    node_label: str = Field(
        max_length=317,
        pattern=LABEL_KEY_PATTERN,
        description="Label key; every node with it belongs to the Testbed, its integer value is the node id.",
    )
    slots_per_node: int = Field(ge=1, le=256, description="Slots on each node of the Testbed.")
    resources_per_slot: ResourcesPerSlot
    tolerations: list[Toleration] | None = Field(
        default=None,
        max_length=64,
        description="Taints of its nodes that its ghosts and executors tolerate (drivers and JobManagers are "
        "left as their jobs say). A node with a NoSchedule or NoExecute taint none of these tolerates holds no "
        "slots.",
    )


class SlotState(StrEnum):
    FREE = "Free"  # held by its ghost pod, nobody's
    RESERVED = "Reserved"  # given to a job by a Scheduling; its executor is not running there yet
    OCCUPIED = "Occupied"  # an executor runs in it


class Slot(EsiModel):
    id: int = Field(ge=0, description="Global slot id, as Schedulings name it.")
    node_name: str
    node_id: int = Field(description="The value of the Testbed's node label on the node.")
    position: int = Field(ge=0, description="Position of the slot on its node.")
    state: SlotState
    job: str | None = Field(default=None, description="The BatchJob the slot is reserved for or used by.")
    scheduling: str | None = Field(default=None, description="The Scheduling that reserved the slot.")
    pod: str | None = Field(default=None, description="The ghost pod (free) or executor pod (occupied) in it.")
    no_room: str | None = Field(
        default=None,
        description="Why the slot has no room now: its node has too little beside the other pods there. It gets no "
        "ghost, and no executor is bound into it until it has (a kubelet would refuse either); null when it has room.",
    )


class SlotCounts(EsiModel):
    nodes: int = Field(default=0, ge=0)
    slots: int = Field(default=0, ge=0)
    free: int = Field(default=0, ge=0)
    reserved: int = Field(default=0, ge=0)
    occupied: int = Field(default=0, ge=0)


class TestbedState(StrEnum):
    PENDING = "Pending"  # not observed yet, or ghost pods still being created
    READY = "Ready"  # every slot free
    IN_USE = "InUse"  # some slot reserved or occupied
    DEGRADED = "Degraded"  # a node cannot hold its slots, or node labels are not distinct integers


class TestbedStatus(ReconciledStatus):
    state: TestbedState = TestbedState.PENDING
    counts: SlotCounts = Field(default_factory=SlotCounts)
    # Atomic: the reconciler, its one writer, replaces the whole table at each write. A keyed list would make
    # the API server track every row's every field in managedFields (a 4,000-slot table: 1.6 MiB of them, 2.5x
    # the CPU per write) for merges nobody makes.
    slots: list[Slot] = Field(
        default_factory=list, max_length=MAX_SLOTS, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    scheduling: str | None = Field(default=None, description="The Scheduling that holds the Testbed.")
    message: str | None = Field(default=None, description="What it is doing or waiting for, in a sentence.")


class Testbed(EsiModel):
    """A whole Testbed object, as written in a manifest or returned by the API server."""

    api_version: Literal["esi.tu-berlin.de/v1alpha1"] = API_VERSION
    kind: Literal["Testbed"] = "Testbed"
    metadata: ObjectMeta
    spec: TestbedSpec
    status: TestbedStatus | None = None
