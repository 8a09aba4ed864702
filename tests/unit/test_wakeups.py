"""The reconcilers' daemon loop (operators.common.Wakeups): decides on wake-ups, and ends as soon as kopf
asks it to stop, so kopf never has to cancel it (and log a warning for every deleted object)."""

from __future__ import annotations

import asyncio
import logging

from kopf._cogs.aiokits.aioenums import FlagSetter
from kopf._core.intents.stoppers import DaemonStoppingReason

from operators.common import Wakeups


def test_a_daemon_decides_on_each_wake_up_and_ends_when_stopped_mid_wait() -> None:
    async def scenario() -> list[str]:
        wakeups = Wakeups("thing")
        stopper: FlagSetter[DaemonStoppingReason] = FlagSetter()
        decisions: list[str] = []

        async def decide() -> float | None:
            decisions.append("decided")
            return None  # look again only when woken (or after the 30 s resync)

        daemon = asyncio.create_task(wakeups.run("key", stopper.async_waiter, decide, logging.getLogger("test")))
        await asyncio.sleep(0.05)
        wakeups.wake(["key"])
        await asyncio.sleep(0.3)  # past the debounce
        stopper.set(reason=DaemonStoppingReason.RESOURCE_DELETED)
        await asyncio.wait_for(daemon, timeout=1)  # the resync is 30 s away: only the stop can end the wait
        wakeups.wake(["key"])  # a wake-up after the end reaches nothing
        return decisions

    assert asyncio.run(scenario()) == ["decided", "decided"]
