"""How the Apache Flink Kubernetes operator merges a FlinkDeployment's pod templates.

The operator gives each component (JobManager, TaskManager) ``spec.podTemplate`` with the component's own
``spec.<component>.podTemplate`` merged over it, by this rule (``FlinkUtils.mergePodTemplates``, the same from
operator 1.12 to 1.15):

* when one of the two is absent, the other is taken as it is;
* for each field of the component's template: two lists are merged as lists (below); a field that is a
  mapping in the common template is merged key by key with the component's value, and keeps what it has when
  that value is not a mapping; anything else is replaced by the component's value;
* lists are merged **by position**: element *i* of the component's list is merged into element *i* of the
  common one, its extra elements are appended, the common list's extra elements stay. An element is merged
  like a field's value above, so a scalar at a position the common list already has is *not* replaced
  (``args: [a]`` over ``args: [b]`` stays ``[b]``), and two containers with different names at one position
  become one container;
* lists are merged **by name** instead only when ``kubernetes.operator.pod-template.merge-arrays-by-name`` is
  true and every element of both lists has a ``name``: same-named elements merged, new names appended, the
  common list's order kept.

Templates are read the way the operator reads them, as Kubernetes objects: absent and null fields and empty
lists say nothing and are left out before merging.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["MERGE_BY_NAME_KEY", "merge_arrays_by_name", "merged_pod_templates"]

MERGE_BY_NAME_KEY: Final = "kubernetes.operator.pod-template.merge-arrays-by-name"


def merge_arrays_by_name(flink_configuration: Mapping[str, Any]) -> bool:
    """Whether a FlinkDeployment's configuration asks the operator to merge pod-template lists by name."""
    return str(flink_configuration.get(MERGE_BY_NAME_KEY, "false")).strip().lower() == "true"


def merged_pod_templates(
    common: Mapping[str, Any] | None, component: Mapping[str, Any] | None, *, by_name: bool = False
) -> dict[str, Any] | None:
    """The pod template the operator gives a component: ``component`` merged over ``common`` (neither changed)."""
    if component is None:
        return None if common is None else _normalised_object(common)
    if common is None:
        return _normalised_object(component)
    merged = _normalised_object(common)
    _merge_into(merged, _normalised_object(component), by_name)
    return merged


def _normalised_object(value: Mapping[str, Any]) -> dict[str, Any]:
    normalised: dict[str, Any] = _normalised(value)
    return normalised


def _normalised(value: Any) -> Any:
    """A deep copy without null fields and empty lists, as a Kubernetes object model serialises it."""
    if isinstance(value, Mapping):
        return {
            str(k): _normalised(v) for k, v in value.items() if v is not None and not (isinstance(v, list) and not v)
        }
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return copy.deepcopy(value)


def _merge_into(to: Any, source: Any, by_name: bool) -> None:
    if not isinstance(to, dict) or not isinstance(source, Mapping):
        return  # merging into a scalar or a list, or merging a non-mapping: nothing changes
    for key, value in source.items():
        current = to.get(key)
        if isinstance(current, list) and isinstance(value, list):
            to[key] = _merged_lists(current, value, by_name)
        elif isinstance(current, dict):
            _merge_into(current, value, by_name)
        else:
            to[key] = copy.deepcopy(value)


def _merged_lists(to: list[Any], source: Sequence[Any], by_name: bool) -> list[Any]:
    if by_name and _all_named(to) and _all_named(source):
        # Keyed by name as the operator keys them: a repeated name keeps its first place and its last element.
        merged = {str(e["name"]): e for e in to}
        for key, element in {str(e["name"]): e for e in source}.items():
            if key in merged:
                _merge_into(merged[key], element, by_name)
            else:
                merged[key] = copy.deepcopy(element)
        return list(merged.values())
    positional = list(to)
    for index, element in enumerate(source):
        if index >= len(positional):
            positional.append(copy.deepcopy(element))
        else:
            _merge_into(positional[index], element, by_name)
    return positional


def _all_named(elements: Sequence[Any]) -> bool:
    return all(isinstance(e, Mapping) and "name" in e for e in elements)
