"""Owner references (esi.objects.owners): a controller owner blocks its deletion on the dependent, another
owner does not."""

from __future__ import annotations

from esi.objects.owners import owner_reference


def test_a_controller_owner_is_marked_and_blocks_deletion() -> None:
    assert owner_reference("esi.tu-berlin.de/v1alpha1", "Testbed", "tb", "uid-tb") == {
        "apiVersion": "esi.tu-berlin.de/v1alpha1",
        "kind": "Testbed",
        "name": "tb",
        "uid": "uid-tb",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_another_owner_is_not_a_controller_and_does_not_block_deletion() -> None:
    reference = owner_reference("esi.tu-berlin.de/v1alpha1", "Scheduling", "s", "uid-s", controller=False)
    assert reference == {
        "apiVersion": "esi.tu-berlin.de/v1alpha1",
        "kind": "Scheduling",
        "name": "s",
        "uid": "uid-s",
        "blockOwnerDeletion": False,
    }
