"""The slot resource: one slot added to a container's resources, and a node's slots advertised."""

from __future__ import annotations

from esi.objects.slot_resource import SLOT_RESOURCE, advertised_slots, requesting_a_slot


def test_a_container_requests_and_is_limited_to_one_slot_beside_what_it_had() -> None:
    resources = {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}, "claims": []}

    assert requesting_a_slot(resources) == {
        "requests": {"cpu": "1", SLOT_RESOURCE: "1"},
        "limits": {"cpu": "1", "memory": "1Gi", SLOT_RESOURCE: "1"},
        "claims": [],
    }
    assert resources["requests"] == {"cpu": "1"}, "the given resources are left as they were"


def test_a_container_without_resources_requests_one_slot() -> None:
    assert requesting_a_slot({}) == {"requests": {SLOT_RESOURCE: "1"}, "limits": {SLOT_RESOURCE: "1"}}


def test_a_node_advertises_its_slots_in_capacity_and_allocatable() -> None:
    assert advertised_slots(4) == {"status": {"capacity": {SLOT_RESOURCE: "4"}, "allocatable": {SLOT_RESOURCE: "4"}}}
