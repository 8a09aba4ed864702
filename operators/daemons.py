"""What esi's reconcilers share in one kopf operator: start-up settings, the holds index, per-object daemons.

Every reconciler is a daemon per object that decides whenever something relevant changes (woken by
``Wakeups``, debounced) and at least every ``RESYNC_SECONDS``; kopf indexes are the caches, so a decision
needs no API read. An API error in one round is logged and retried on the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

import kopf
from lightkube import ApiError, AsyncClient

from esi.decisions.events import Event
from esi.objects.holds import HOLD_KIND_LABEL, Hold, HoldKind, read_hold
from esi.resources.meta import GROUP
from kube.indexes import index
from kube.writes import StaleView

__all__ = [
    "CHAIN_DEBOUNCE_SECONDS",
    "DAEMON_EXIT_SECONDS",
    "DEBOUNCE_SECONDS",
    "FINALIZER",
    "RESYNC_SECONDS",
    "HoldKey",
    "NoDiffBase",
    "Wakeups",
    "debounce",
    "first",
    "hold_of",
    "holds",
    "post_events",
    "swap_seen",
]

RESYNC_SECONDS = 30.0
# At most one decision per object this often, so that a burst of events is decided together: a Testbed's
# come in bursts (its pods); a Scheduling's and a BatchJob's one at a time along the way from a Scheduling to
# its application, where every wait adds to the time until a job runs — and a Testbed woken on that way (a
# hold, a reservation) decides at once (``Wakeups.wake``).
DEBOUNCE_SECONDS = 0.1
CHAIN_DEBOUNCE_SECONDS = 0.02
# How long kopf lets a daemon end by itself (it does at once: ``Wakeups.run``) before cancelling it.
DAEMON_EXIT_SECONDS = 2.0
# kopf's, on every object it reconciles: its daemon stops, a Scheduling lets go of its holds and a BatchJob keeps
# its runs before it is gone.
FINALIZER = f"{GROUP}/release"
FIELD_MANAGER = "esi-operators"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: esi's kopf change handlers are on.delete handlers (a Scheduling's, a BatchJob's), which
    kopf starts from the deletion timestamp, never from a diff. Every object's essence is empty, and so is the one
    kopf fetches — not absent, or kopf would take each object for new and patch its essence onto it: a write to
    every new Scheduling and BatchJob, which also made their reconcilers' first status writes meet a stale view.
    (kopf would otherwise build an essence for every event of every kind it watches: a deep copy of every
    object.)"""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.startup()
async def _start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.level = logging.WARNING  # Events are esi's own decisions, not kopf's handler chatter
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.finalizer = FINALIZER
    memo.client = AsyncClient(field_manager=FIELD_MANAGER)


@kopf.on.cleanup()
async def _stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.client.close()


HoldKey = tuple[str, HoldKind, str]  # (namespace, kind, held)


@index("coordination.k8s.io", "v1", "leases", labels={HOLD_KIND_LABEL: kopf.PRESENT})
def holds(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[HoldKey, Hold]:
    """Who holds each Testbed and BatchJob, by (namespace, kind, name)."""
    hold = read_hold(body)
    return {} if hold is None else {(namespace or "", hold.kind, hold.held): hold}


def first(values: Iterable[V] | None) -> V | None:
    """The one value a kopf index holds for a key (an object contributes one), or None."""
    return next(iter(values or ()), None)


def hold_of(held: Mapping[HoldKey, Iterable[Hold]], namespace: str, kind: HoldKind, name: str) -> Hold | None:
    """The hold on ``kind`` ``name`` in ``namespace``, from the ``holds`` index, or None."""
    return first(held.get((namespace, kind, name)))


class Wakeups:
    """Per-object daemons of one reconciler, and the events that make them decide again."""

    def __init__(self, what: str, debounce_seconds: float = DEBOUNCE_SECONDS) -> None:
        self.what = what
        self.debounce_seconds = debounce_seconds
        self._events: dict[Hashable, asyncio.Event] = {}
        self._hurried: dict[Hashable, asyncio.Event] = {}  # woken at once: no debounce
        self._ended: dict[Hashable, asyncio.Event] = {}  # set once a daemon's last decision is done

    def wake(self, keys: Iterable[Hashable] | None = None, *, at_once: bool = False) -> None:
        """Ask the daemons of ``keys`` (all of them when None) to decide again. ``at_once``: for a change on the
        way from a Scheduling to its running job — decided without the debounce, which gathers bursts of
        events, yet no sooner than the last decision took (``debounce``)."""
        for key, event in list(self._events.items()):
            if keys is None or key in keys:
                if at_once:
                    self._hurried[key].set()
                event.set()

    def wake_later(self, keys: Iterable[Hashable], seconds: float) -> None:
        """Wake the daemons of ``keys`` in ``seconds``: for a change that a change waking them at once usually
        follows, so that one decision takes both (the later wake-up finds nothing new to write)."""
        asyncio.get_running_loop().call_later(seconds, self.wake, list(keys))

    def wake_where(self, matches: Callable[[Hashable], bool]) -> None:
        for key, event in list(self._events.items()):
            if matches(key):
                event.set()

    async def ended(self, key: Hashable, timeout: float) -> None:
        """Until the daemon of ``key``, told to stop, has ended — its decision in flight written — or ``timeout``
        seconds went by; at once when none runs."""
        ended = self._ended.get(key)
        if ended is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), timeout=timeout)

    async def run(
        self,
        key: Hashable,
        stopped: kopf.DaemonStopped,
        decide: Callable[[], Awaitable[float | None]],
        logger: kopf.Logger,
    ) -> None:
        """Decide until the object goes: at once, then on every wake-up, resync, or when ``decide`` asks
        to look again (it returns seconds; None: only on a change)."""
        wake = self._events.setdefault(key, asyncio.Event())
        hurried = self._hurried.setdefault(key, asyncio.Event())
        ended = self._ended.setdefault(key, asyncio.Event())

        async def wake_when_stopped() -> None:  # so that a stop ends the wait at once, not kopf's cancelling
            await stopped.wait()
            hurried.set()
            wake.set()

        watching_stop = asyncio.create_task(wake_when_stopped())
        loop = asyncio.get_running_loop()
        try:
            while not stopped:
                wake.clear()
                hurried.clear()
                again: float | None = None
                stale = False
                started = loop.time()
                try:
                    again = await decide()
                except StaleView:  # e.g. kopf wrote to the object meanwhile: decide again on the newer view,
                    # as soon as its event wakes the daemon (or after a debounce, if none does)
                    logger.debug(f"{self.what} {key}: changed while deciding; deciding again")
                    again, stale = self.debounce_seconds, True
                except ApiError as err:  # retried on the next wake-up or resync
                    logger.warning(f"{self.what} {key}: {err.status.message}")
                decided_at = loop.time()
                timeout = RESYNC_SECONDS if again is None else max(min(again, RESYNC_SECONDS), 0.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=timeout)
                if not stopped and not stale:
                    took = decided_at - started
                    pause = debounce(decided_at, loop.time(), self.debounce_seconds, took=took)
                    if pause > 0 and not hurried.is_set():
                        with contextlib.suppress(TimeoutError):  # a wake-up at once ends the debounce
                            await asyncio.wait_for(hurried.wait(), timeout=pause)
                    await asyncio.sleep(debounce(decided_at, loop.time(), 0.0, took=took))
        finally:
            watching_stop.cancel()
            self._events.pop(key, None)
            self._hurried.pop(key, None)
            self._ended.pop(key, None)
            ended.set()


def debounce(decided_at: float, now: float, seconds: float = DEBOUNCE_SECONDS, *, took: float = 0.0) -> float:
    """Seconds to wait before deciding again, woken at ``now`` after a decision made at ``decided_at`` that
    ``took`` seconds: none for a wake-up after a quiet spell (a lone event is decided at once), otherwise the
    rest of the debounce ``seconds`` — or of ``took``, if longer: an object is decided at most half the time,
    so that one of thousands of slots (a decision and a status write of a few hundred ms) is not decided back
    to back while a stream of pod events keeps waking it."""
    return max(decided_at + max(seconds, took) - now, 0.0)


def swap_seen(seen: dict[K, V], key: K, now: V | None) -> V | None:
    """Record ``now`` as what object ``key`` looks like as it wakes daemons (forget it when None: it went), and
    answer what it looked like when it last did — so a handler wakes them only for what changed."""
    before = seen.pop(key, None)
    if now is not None:
        seen[key] = now
    return before


def post_events(body: kopf.Body, events: Iterable[Event]) -> None:
    """A decision's Kubernetes Events on the object, each with the type its decision gave it.

    Posted after the status is written: a decision whose write meets ``StaleView`` is made again, and its
    Events are told then, once."""
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)
