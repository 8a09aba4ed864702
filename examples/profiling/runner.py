"""The profiling scheduler's two loops, run side by side as asyncio tasks against the esi API.

- **Profiler**: again and again, the pair of jobs whose co-location runtime has the fewest samples runs in
  two slots of one node of the profiling Testbed; each job's runtime next to the other updates the
  matrix in that job's ``externalScheduler`` data (``examples.profiling.matrix``).
- **Scheduler**: again and again, a queue on the scheduler Testbed that puts each job of the round next
  to its best partner (``examples.profiling.plan``).

Each loop keeps at most one Scheduling of its own at a time, named ``<prefix>-<random>``; a busy job
simply makes it wait in AcquireState. All state is in esi: a loop first finishes whatever Scheduling of its
prefix it finds on its Testbed (left by a crash or Ctrl-C) — waits for it, records it, deletes it — so
a restart neither loses a finished run nor counts one twice. A Scheduling that fails or outlasts
``round_timeout`` is deleted and measures nothing. Errors of the API (it restarted, a job vanished) are
logged and the round is tried again after ``retry_delay``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from esi.client import AsyncEsiClient, EsiError, NotFound, ResourceDeleted, WaitTimeout
from esi.wire.rest import ExternalBatchJob, ExternalScheduling, ExternalTestbed
from examples.profiling.matrix import (
    NO_SAMPLES,
    ColocationMatrix,
    Entry,
    Rejected,
    UnreadableEntry,
    least_sampled_pair,
    measure,
    parse_entry,
    profile_row,
    recorded_by,
    with_profile_entry,
)
from examples.profiling.plan import IDLE_STATE, node_slots, plan_queue, profiling_slots, round_jobs

__all__ = [
    "FINAL_STATES",
    "Loop",
    "Outcome",
    "ProfiledPair",
    "Profiler",
    "ScheduledRound",
    "Scheduler",
    "Settings",
    "run",
]

FINAL_STATES = ("CompletedState", "FailedState")
TESTBED_READY = "SUCCESS"  # every slot free (the original's name for it)
Loop = Literal["profiler", "scheduler"]


@dataclass(frozen=True)
class Settings:
    """What both loops need; ``rounds`` ``None`` runs until cancelled."""

    profiler_testbed: str = "profiler-slots"
    scheduler_testbed: str = "scheduler-slots"
    rounds: int | None = None
    time_scale: float = 1.0  # wall-clock seconds per stored second (a simulation's --time-scale)
    round_timeout: float = 3600.0
    retry_delay: float = 5.0
    profiler_prefix: str = "profiler-scheduling"
    scheduler_prefix: str = "example-scheduling"

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be positive, not {self.time_scale!r}")
        if self.rounds is not None and self.rounds < 0:
            raise ValueError(f"rounds must not be negative, not {self.rounds!r}")


@dataclass(frozen=True)
class ProfiledPair:
    """One profiling Scheduling finished: per job, the seconds recorded (stored units) or why none."""

    scheduling: str
    jobs: tuple[str, ...]
    recorded: dict[str, float | Rejected] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduledRound:
    """One scheduler Scheduling finished: its queue, final state, and each job's runtime or why none."""

    scheduling: str
    queue: tuple[str, ...]
    state: str | None
    runtimes: dict[str, float | Rejected] = field(default_factory=dict)


class _Loop:
    """What both loops share: finishing leftovers, waiting for the Testbed, counting rounds, retrying."""

    kind: Loop

    def __init__(self, client: AsyncEsiClient, settings: Settings, testbed: str, prefix: str) -> None:
        self.client = client
        self.settings = settings
        self.testbed = testbed
        self.prefix = prefix
        self.log = logging.getLogger(f"examples.profiling.{self.kind}")
        # Deleted Schedulings stay listed until their finalizer is done; they are not leftovers.
        self.deleted: set[str] = set()

    async def run(self) -> None:
        done = 0
        while self.settings.rounds is None or done < self.settings.rounds:
            try:
                for leftover in await self._leftovers():
                    self.log.info("finishing %s, left by an earlier run", leftover.name)
                    await self.finish(leftover.name)
                await self.round()
                done += 1
            except EsiError as err:
                self.log.warning("round failed, trying again in %gs: %s", self.settings.retry_delay, err)
                await asyncio.sleep(self.settings.retry_delay)

    async def round(self) -> None:
        """Submit one Scheduling and finish it."""
        raise NotImplementedError

    async def finish(self, name: str) -> None:
        """Wait for the Scheduling ``name`` to end, record it, delete it."""
        raise NotImplementedError

    def new_name(self) -> str:
        return f"{self.prefix}-{uuid.uuid4().hex[:8]}"

    async def _leftovers(self) -> list[ExternalScheduling]:
        return [
            s
            for s in await self.client.schedulings()
            if s.name.startswith(f"{self.prefix}-") and s.test_bed == self.testbed and s.name not in self.deleted
        ]

    async def wait_until_ended(self, name: str) -> ExternalScheduling | None:
        """The Scheduling once Completed or Failed; ``None`` if it was deleted or timed out (then deleted)."""
        try:
            return await self.client.wait_for_scheduling(name, FINAL_STATES, timeout=self.settings.round_timeout)
        except (ResourceDeleted, NotFound):
            self.log.warning("%s is gone (deleted elsewhere, or earlier); nothing recorded", name)
        except WaitTimeout as err:
            self.log.warning("%s; deleting it, nothing recorded", err)
            await self.delete(name)
        return None

    async def delete(self, name: str) -> bool:
        """Delete the Scheduling; ``False`` if it was already gone (someone else finished it)."""
        try:
            await self.client.delete_scheduling(name)
        except NotFound:
            self.deleted.add(name)
            return False
        self.deleted.add(name)
        return True

    async def views_or_delete(self, name: str, jobs: Sequence[str]) -> dict[str, ExternalBatchJob] | None:
        """The Scheduling's jobs as they are now; if one is gone, the Scheduling is deleted instead (its runs
        can no longer be read, and retrying would never end)."""
        try:
            return {job: await self.client.job(job) for job in jobs}
        except NotFound as err:
            self.log.warning("%s: %s; deleting it, nothing recorded", name, err)
            await self.delete(name)
            return None

    async def ready_testbed(self, usable: Callable[[ExternalTestbed], bool]) -> ExternalTestbed:
        """The Testbed once every slot is free and ``usable`` accepts it: a queue then lands where planned."""
        async with self.client.watch("testbeds", self.testbed) as events:
            try:
                current: ExternalTestbed | None = await self.client.testbed(self.testbed)
            except NotFound:
                self.log.info("waiting for testbed %s to exist", self.testbed)
                current = None
            if current is not None and current.state == TESTBED_READY and usable(current):
                return current
            async for event in events:
                found = event.resource
                if found is not None and found.state == TESTBED_READY and usable(found):
                    return found
        raise EsiError(f"the subscription to testbed {self.testbed} ended")

    async def jobs_when_at_least(self, count: int) -> dict[str, ExternalBatchJob]:
        """Every job, once there are at least ``count``."""
        async with self.client.watch("jobs") as events:
            jobs = await self.client.jobs()
            if len(jobs) >= count:
                return jobs
            self.log.info("waiting for at least %d jobs (there are %d)", count, len(jobs))
            async for _ in events:
                jobs = await self.client.jobs()
                if len(jobs) >= count:
                    return jobs
        raise EsiError("the subscription to jobs ended")


class Profiler(_Loop):
    """Runs the least-sampled pair on the profiling Testbed and records both jobs' runtimes."""

    kind: Loop = "profiler"

    def __init__(self, client: AsyncEsiClient, settings: Settings) -> None:
        super().__init__(client, settings, settings.profiler_testbed, settings.profiler_prefix)
        self.finished: list[ProfiledPair] = []

    async def round(self) -> None:
        testbed = await self.ready_testbed(lambda t: profiling_slots(t) is not None)
        jobs = await self.jobs_when_at_least(2)
        matrix = ColocationMatrix.of_jobs(jobs.values())
        for problem in matrix.problems:
            self.log.warning("ignored an unreadable profile entry: %s", problem)
        pair = least_sampled_pair(matrix, busy={name for name, job in jobs.items() if job.state != IDLE_STATE})
        slots = profiling_slots(testbed)
        # Both exist: there are at least two jobs, and the Testbed was taken only with two slots on a node.
        assert pair is not None
        assert slots is not None
        (first, second), name = pair, self.new_name()
        await self.client.submit_slots(name, testbed.name, {first: [slots[0]], second: [slots[1]]}, strict=False)
        self.log.info(
            "%s: %s next to %s (%d samples so far) in slots %s", name, first, second, matrix.entry(*pair).samples, slots
        )
        await self.finish(name)

    async def finish(self, name: str) -> None:
        ended = await self.wait_until_ended(name)
        if ended is None:
            return
        jobs = _jobs_of(ended)
        if len(jobs) != 2:  # not a pair: nothing this profiler would have submitted
            self.log.warning("%s runs %s, not a pair; deleting it", name, ", ".join(jobs) or "nothing")
            await self.delete(name)
            return
        views = await self.views_or_delete(name, jobs)
        if views is None:
            return
        recorded: dict[str, float | Rejected] = {}
        # Recorded before the Scheduling is deleted, and recording is idempotent: a crash in between
        # leaves the Scheduling to the next start, which records nothing twice and then deletes it.
        for job, partner in (jobs, jobs[::-1]):
            outcome = measure(views[job], name, views[partner])
            if isinstance(outcome, Rejected):
                self.log.warning("%s: no sample of %s next to %s: %s", name, job, partner, outcome.reason)
                recorded[job] = outcome
                continue
            recorded[job] = seconds = outcome / self.settings.time_scale
            entry = await self._record(job, partner, seconds, name)
            self.log.info("%s: %s next to %s ran %.0fs; now %s", name, job, partner, seconds, entry)
        await self.delete(name)
        self.finished.append(ProfiledPair(name, jobs, recorded))

    async def _record(self, job: str, partner: str, seconds: float, scheduling: str) -> Entry:
        """Add the sample to ``M[job][partner]`` as the job holds it now (read, update, write back),
        unless ``scheduling`` was recorded there already."""
        data = (await self.client.job(job)).external_scheduler
        text = profile_row(data).get(partner)
        try:
            entry = parse_entry(text) if text is not None else NO_SAMPLES
        except UnreadableEntry as err:
            self.log.warning("%s's entry for %s is unreadable, starting it afresh: %s", job, partner, err)
            entry = NO_SAMPLES
        if recorded_by(data, partner) == scheduling:
            return entry
        updated = entry.with_sample(seconds)
        await self.client.set_external_scheduler(job, with_profile_entry(data, partner, updated, scheduling))
        return updated


class Scheduler(_Loop):
    """Submits a queue pairing each job of the round with its best partner on the scheduler Testbed."""

    kind: Loop = "scheduler"

    def __init__(self, client: AsyncEsiClient, settings: Settings) -> None:
        super().__init__(client, settings, settings.scheduler_testbed, settings.scheduler_prefix)
        self.finished: list[ScheduledRound] = []

    async def round(self) -> None:
        testbed = await self.ready_testbed(lambda t: bool(node_slots(t)))
        jobs = await self.jobs_when_at_least(1)
        matrix = ColocationMatrix.of_jobs(jobs.values())
        chosen = round_jobs(jobs, len(node_slots(testbed)), self.prefix)
        queue = plan_queue(matrix, chosen, testbed)
        name = self.new_name()
        await self.client.submit_queue(name, testbed.name, queue)
        self.log.info("%s: queue %s", name, ", ".join(queue))
        await self.finish(name)

    async def finish(self, name: str) -> None:
        ended = await self.wait_until_ended(name)
        if ended is None:
            return
        views = await self.views_or_delete(name, _jobs_of(ended))
        if views is None:
            return
        runtimes: dict[str, float | Rejected] = {}
        for job, view in views.items():
            outcome = measure(view, name)
            runtimes[job] = outcome if isinstance(outcome, Rejected) else outcome / self.settings.time_scale
        await self.delete(name)
        self.finished.append(ScheduledRound(name, tuple(ended.queue or ()), ended.state, runtimes))
        self.log.info(
            "%s: %s; %s",
            name,
            ended.state,
            ", ".join(f"{j} {r.reason if isinstance(r, Rejected) else f'{r:.0f}s'}" for j, r in runtimes.items()),
        )


def _jobs_of(scheduling: ExternalScheduling) -> tuple[str, ...]:
    """The distinct jobs of a Scheduling, in order of first mention."""
    if scheduling.queue is not None:
        return tuple(dict.fromkeys(scheduling.queue))
    return tuple(dict.fromkeys(j.name for j in scheduling.slots.jobs)) if scheduling.slots is not None else ()


@dataclass(frozen=True)
class Outcome:
    """What the loops finished, in order."""

    profiled: list[ProfiledPair]
    scheduled: list[ScheduledRound]


async def run(client: AsyncEsiClient, settings: Settings, loops: Sequence[Loop] = ("profiler", "scheduler")) -> Outcome:
    """Run the chosen loops side by side until each has done ``settings.rounds`` rounds (or forever)."""
    profiler, scheduler = Profiler(client, settings), Scheduler(client, settings)
    async with asyncio.TaskGroup() as group:
        if "profiler" in loops:
            group.create_task(profiler.run(), name="profiler")
        if "scheduler" in loops:
            group.create_task(scheduler.run(), name="scheduler")
    return Outcome(profiler.finished, scheduler.finished)
