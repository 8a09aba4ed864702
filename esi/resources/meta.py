"""What the three esi resources share: API group, the camelCase model base, references and conditions.

Conditions follow the Kubernetes conventions (``metav1.Condition``): a ``type``, a ``status`` of True, False
or Unknown, a CamelCase ``reason``, a human ``message``, ``lastTransitionTime`` (changed only when the
status changes) and the ``observedGeneration`` the condition was computed from. ``set_condition`` is the
one way they change: a small pure setter that reports whether anything changed, so reconcilers write
status only when it did.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError

__all__ = [
    "API_VERSION",
    "GROUP",
    "MAX_NAMESPACE_LENGTH",
    "MAX_NAME_LENGTH",
    "NAMESPACE_PATTERN",
    "NAME_PATTERN",
    "PART_OF_LABEL",
    "ROLE_LABEL",
    "VERSION",
    "Condition",
    "ConditionStatus",
    "EsiModel",
    "ObjectMeta",
    "ObjectName",
    "ObjectReference",
    "PodRole",
    "ReconciledStatus",
    "deep_merged",
    "field_refusal",
    "find_condition",
    "is_namespace_name",
    "is_object_name",
    "part_of_esi",
    "set_condition",
    "set_conditions",
    "state_named",
    "utc_now",
]

GROUP: Final = "esi.tu-berlin.de"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "esi.tu-berlin.de/v1alpha1"  # GROUP/VERSION, spelled out: the models' Literal types need it
# The recommended label (app.kubernetes.io) on everything esi installs or creates: CRDs, PriorityClasses,
# ghost pods, the installation's own objects.
PART_OF_LABEL: Final = "app.kubernetes.io/part-of"
# Which of a Testbed's pods a pod is: its value is the pod's ``PodRole``.
ROLE_LABEL: Final = f"{GROUP}/role"


class PodRole(StrEnum):
    """What one of a Testbed's pods is, as its ``ROLE_LABEL`` says: a ghost holding a slot's room, or an
    executor in the slot."""

    GHOST = "ghost"
    EXECUTOR = "executor"


# Bounds for lists and strings: the API server needs them to estimate the cost of CEL rules, and they keep
# a single object far below etcd's size limit.
MAX_NAME_LENGTH = 253
# What the API server accepts as the name of an esi object (a DNS-1123 subdomain) and of a namespace (label).
NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NAMESPACE_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_NAMESPACE_LENGTH: Final = 63


# The name of an esi object or a pod, as a model's field (and its schema) says it.
ObjectName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)]


def is_object_name(name: str) -> bool:
    """Whether ``name`` can name an esi object or a pod (a DNS-1123 subdomain)."""
    return len(name) <= MAX_NAME_LENGTH and re.fullmatch(NAME_PATTERN, name) is not None


def is_namespace_name(name: str) -> bool:
    return len(name) <= MAX_NAMESPACE_LENGTH and re.fullmatch(NAMESPACE_PATTERN, name) is not None


def field_refusal(model: type[BaseModel], field: tuple[str, ...], message: str, value: Any = None) -> ValidationError:
    """A refusal of ``model`` at ``field`` (aliases, below the model), for a validator of the whole model to raise:
    pydantic then reports it at that field, as the API server reports the CEL rule with the same ``fieldPath``."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    return ValidationError.from_exception_data(model.__name__, [InitErrorDetails(type=error, loc=field, input=value)])


class EsiModel(BaseModel):
    """Base of every esi model: camelCase on the wire, snake_case in Python, unknown fields refused.

    ``x-kubernetes-validations`` (CEL rules the API server enforces) are declared per class in
    ``cel_rules`` and end up in the generated CRD, as do a model's ``other_shape`` and ``optional_in_schema``
    (docs/compatibility.md#manifests: shapes of the original ESI that manifests may still write).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )
    cel_rules: ClassVar[Sequence[dict[str, str]]] = ()
    other_shape: ClassVar[type[BaseModel] | None] = None
    """Another shape of the model that manifests may write (the original ESI's), translated by a before-validator:
    its properties join the schema's, so that the API server keeps them and CEL rules can name them."""
    optional_in_schema: ClassVar[tuple[str, ...]] = ()
    """Required fields the schema does not require, because a manifest may write another field in their place (a
    CEL rule asks for exactly one of the two, a before-validator fills them in)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if cls.cel_rules:
            target["x-kubernetes-validations"] = [dict(r) for r in cls.cel_rules]
        if cls.other_shape is not None:
            other = cls.other_shape.model_json_schema(by_alias=True, mode="validation")
            if "$defs" in other:
                raise TypeError(f"{cls.__name__}: the other shape {cls.other_shape.__name__} must not nest models")
            own = target.setdefault("properties", {})
            own.update({name: node for name, node in other["properties"].items() if name not in own})
        if cls.optional_in_schema:
            required = [f for f in target.get("required", ()) if f not in cls.optional_in_schema]
            target.pop("required", None)
            if required:
                target["required"] = required
        return schema

    def to_json_dict(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase keys, absent optionals left out."""
        return self.model_dump(mode="json", exclude_none=True)


class ObjectReference(EsiModel):
    """A reference to another esi object, as the original wrote it: ``{name, namespace}``.

    The namespace may be left out; it then means the referring object's own namespace.
    """

    # Only names an object can have: the API server refuses anything else when the reference is written.
    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN, description="Name of the object.")
    namespace: str | None = Field(
        default=None,
        max_length=MAX_NAMESPACE_LENGTH,
        pattern=NAMESPACE_PATTERN,
        description="Namespace of the object; the referring object's namespace when left out.",
    )

    def in_namespace(self, default: str) -> tuple[str, str]:
        """(namespace, name), with ``default`` for a reference without namespace."""
        return (self.namespace or default, self.name)


class ObjectMeta(EsiModel):
    """The object metadata esi reads; the rest of what the API server sends is kept, not interpreted."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(EsiModel):
    """One aspect of an object's state, in the shape of Kubernetes' ``metav1.Condition``."""

    type: str = Field(
        min_length=1,
        max_length=316,
        pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
    )
    status: ConditionStatus
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(default="", max_length=32768)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)


class ReconciledStatus(EsiModel):
    """What every esi status has, written by the resource's own reconciler only."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(default=None, ge=0, description="The generation this status reflects.")


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    *,
    now: datetime,
    observed_generation: int | None = None,
) -> tuple[list[Condition], bool]:
    """The conditions with ``type_`` set as given, and whether anything changed.

    ``lastTransitionTime`` moves only when the status changes, as Kubernetes conventions ask; a new reason,
    message or generation alone updates the condition but keeps its transition time.
    """
    if now.tzinfo is None:
        raise ValueError("condition times must be timezone-aware")
    current = find_condition(conditions, type_)
    # Whole seconds, as Kubernetes writes condition times (metav1.Time), whatever the clock's resolution.
    transition = (
        current.last_transition_time if current is not None and current.status == status else now.replace(microsecond=0)
    )
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=transition,
        observed_generation=observed_generation,
    )
    if current == updated:
        return list(conditions), False
    if current is None:
        return [*conditions, updated], True
    return [updated if c.type == type_ else c for c in conditions], True


def set_conditions(
    conditions: Sequence[Condition],
    wanted: Iterable[tuple[str, bool, str, str]],
    *,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """``set_condition`` for several True/False conditions at once: (type, holds, reason, message) each."""
    updated = list(conditions)
    for type_, holds, reason, message in wanted:
        status = ConditionStatus.TRUE if holds else ConditionStatus.FALSE
        updated, _ = set_condition(
            updated, type_, status, reason, message, now=now, observed_generation=observed_generation
        )
    return updated


def deep_merged(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` deep-merged onto ``base`` (both left as they are): mappings key by key, the rest replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merged(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def part_of_esi() -> dict[str, str]:
    """The labels that mark an object as part of esi."""
    return {PART_OF_LABEL: "esi"}


S = TypeVar("S", bound=StrEnum)


def state_named(states: type[S], value: object) -> S | None:
    """The member of ``states`` a raw status field names; None when the field is absent or names none of them
    (e.g. a status written by another version of esi)."""
    if not isinstance(value, str):
        return None
    try:
        return states(value)
    except ValueError:
        return None


def utc_now() -> datetime:
    """The clock reconcilers inject by default, to the millisecond; tests pass their own time instead.

    Milliseconds, not whole seconds: a run's start and end are what a scheduler measures jobs by, and runs
    of a few seconds (or a simulation's scaled ones) would otherwise be off by up to a second each.
    """
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
