"""A TaskManager fitted to its slot (``esi.objects.flink_memory.fitted_task_manager``): for every slot from the
smallest up, the parts Flink splits its memory into add up to the slot and each keeps Flink's minimum."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esi.objects.flink_memory import (
    MemoryConfigError,
    fitted_task_manager,
    smallest_task_manager,
    task_manager_memory,
)

MIB = 2**20
# Flink's defaults (taskmanager.memory.*), which a fitted TaskManager keeps but for its managed memory.
FRAMEWORK_HEAP = FRAMEWORK_OFF_HEAP = 128 * MIB
METASPACE = 256 * MIB
OVERHEAD_MIN, OVERHEAD_MAX = 192 * MIB, 1024 * MIB
NETWORK_MIN = 64 * MIB
SMALLEST = smallest_task_manager({}) // MIB


def test_the_smallest_fitted_taskmanager_is_far_below_flinks_default_one() -> None:
    assert SMALLEST == 771
    assert smallest_task_manager({"taskmanager.memory.managed.fraction": "0.4"}) // MIB == 982  # as written


@given(st.integers(min_value=SMALLEST, max_value=8192))
def test_every_slot_from_the_smallest_up_is_split_into_parts_that_fill_it_each_at_flinks_minimum(mib: int) -> None:
    fitted = fitted_task_manager(mib * MIB, {})

    overhead = fitted.process - fitted.flink - METASPACE
    parts = FRAMEWORK_HEAP + FRAMEWORK_OFF_HEAP + fitted.task_heap + fitted.managed + fitted.network
    assert parts + METASPACE + overhead == fitted.process == mib * MIB
    assert OVERHEAD_MIN <= overhead <= OVERHEAD_MAX
    assert fitted.network >= NETWORK_MIN
    # The task heap keeps 64 MiB, or in smaller slots the default's 60% of what it shares with managed memory.
    assert fitted.task_heap >= min(64 * MIB, (fitted.task_heap + fitted.managed) * 6 // 10)
    assert fitted.task_heap >= MIB
    assert fitted.managed >= MIB
    # What esi adds is what Flink needs to split it so: Flink's own model, given those settings, agrees.
    assert task_manager_memory(mib * MIB, fitted.settings) == fitted.__class__(
        fitted.process, fitted.flink, fitted.task_heap, fitted.managed, fitted.network
    )


@given(st.integers(min_value=SMALLEST, max_value=4096))
def test_a_larger_slot_never_gets_a_smaller_task_heap_or_managed_memory(mib: int) -> None:
    smaller, larger = fitted_task_manager(mib * MIB, {}), fitted_task_manager((mib + 1) * MIB, {})

    assert larger.managed >= smaller.managed
    assert larger.task_heap >= smaller.task_heap - MIB  # whole-MiB managed memory moves the heap by under a MiB


@pytest.mark.parametrize("mib", [SMALLEST - 1, 512, 1])
def test_below_the_smallest_it_is_refused(mib: int) -> None:
    with pytest.raises(MemoryConfigError, match="cannot start"):
        fitted_task_manager(mib * MIB, {})


def test_the_users_own_managed_memory_is_never_changed() -> None:
    conf = {"taskmanager.memory.managed.fraction": "0.1"}

    assert fitted_task_manager(896 * MIB, conf) == task_manager_memory(896 * MIB, conf)
    with pytest.raises(MemoryConfigError):
        fitted_task_manager(896 * MIB, {"taskmanager.memory.managed.fraction": "0.5"})
