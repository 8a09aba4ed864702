"""What esi's reconcilers share in one kopf operator: start-up settings, the holds cache, per-object daemons.

Every reconciler is a daemon per object that decides whenever something relevant changes (woken by
``Wakeups``, debounced) and at least every ``RESYNC_SECONDS``; kopf indexes are the caches, so a decision
needs no API read. An API error in one round is logged and retried on the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.types import PatchType

from esi.objects.holds import HOLD_KIND_LABEL, Hold, HoldKind, read_hold
from esi.resources.meta import GROUP

__all__ = [
    "DAEMON_EXIT_SECONDS",
    "DEBOUNCE_SECONDS",
    "FINALIZER",
    "RESYNC_SECONDS",
    "StaleView",
    "Wakeups",
    "create",
    "first",
    "hold_of",
    "holds",
    "ignore",
    "post_events",
    "write_status",
]

RESYNC_SECONDS = 30.0
DEBOUNCE_SECONDS = 0.1
# How long kopf lets a daemon end by itself (it does at once: ``Wakeups.run``) before cancelling it.
DAEMON_EXIT_SECONDS = 2.0
FINALIZER = f"{GROUP}/release"  # a Scheduling's: its holds are let go before it is gone
FIELD_MANAGER = "esi-operators"


@kopf.on.startup()
async def _start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.level = logging.WARNING  # Events are esi's own decisions, not kopf's handler chatter
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.persistence.finalizer = FINALIZER
    memo.client = AsyncClient(field_manager=FIELD_MANAGER)


@kopf.on.cleanup()
async def _stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.client.close()


# An index handler answers {} when an object no longer belongs in the index: kopf keeps an object's earlier
# entries when a handler returns None.
@kopf.index("coordination.k8s.io", "v1", "leases", labels={HOLD_KIND_LABEL: kopf.PRESENT})
def holds(*, namespace: str | None, body: kopf.Body, **_: Any) -> dict[tuple[str, HoldKind, str], Hold]:
    """Who holds each Testbed and BatchJob, by (namespace, kind, name)."""
    hold = read_hold(body)
    return {} if hold is None else {(namespace or "", hold.kind, hold.held): hold}


def first(values: Iterable[Any] | None) -> Any:
    """The one value a kopf index holds for a key (an object contributes one), or None."""
    return next(iter(values or ()), None)


def hold_of(index: Mapping[Any, Iterable[Hold]], namespace: str, kind: HoldKind, name: str) -> Hold | None:
    hold: Hold | None = first(index.get((namespace, kind, name)))
    return hold


class StaleView(Exception):
    """A guarded status write found the object changed since the decision was made on it."""


class Wakeups:
    """Per-object daemons of one reconciler, and the events that make them decide again."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._events: dict[Hashable, asyncio.Event] = {}

    def wake(self, keys: Iterable[Hashable] | None = None) -> None:
        """Ask the daemons of ``keys`` (all of them when None) to decide again."""
        for key, event in list(self._events.items()):
            if keys is None or key in keys:
                event.set()

    def wake_where(self, matches: Callable[[Hashable], bool]) -> None:
        for key, event in list(self._events.items()):
            if matches(key):
                event.set()

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

        async def wake_when_stopped() -> None:  # so that a stop ends the wait at once, not kopf's cancelling
            await stopped.wait()
            wake.set()

        watching_stop = asyncio.create_task(wake_when_stopped())
        try:
            while not stopped:
                wake.clear()
                again: float | None = None
                try:
                    again = await decide()
                except StaleView:  # e.g. kopf added its finalizer meanwhile: decide again on the newer view
                    logger.debug(f"{self.what} {key}: changed while deciding; deciding again")
                    again = 0.0
                except ApiError as err:  # retried on the next wake-up or resync
                    logger.warning(f"{self.what} {key}: {err.status.message}")
                timeout = RESYNC_SECONDS if again is None else max(min(again, RESYNC_SECONDS), 0.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=timeout)
                if not stopped:
                    await asyncio.sleep(DEBOUNCE_SECONDS)
        finally:
            watching_stop.cancel()
            self._events.pop(key, None)


async def write_status(
    client: AsyncClient,
    status_resource: Any,
    body: kopf.Body,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    guarded: bool = True,
) -> None:
    """Replace the object's whole status with ``new`` if it differs from ``old`` (a merge patch could not drop
    fields that went away). ``guarded``: only over the version decided on — a write decided on a stale view
    then raises ``StaleView`` (and the daemon decides again) instead of undoing what happened meanwhile."""
    if new == old:
        return
    patch: list[dict[str, Any]] = [{"op": "add", "path": "/status", "value": dict(new)}]
    if guarded:
        patch.insert(
            0, {"op": "test", "path": "/metadata/resourceVersion", "value": body["metadata"]["resourceVersion"]}
        )
    name, namespace = body["metadata"]["name"], body["metadata"].get("namespace")
    try:
        await client.patch(status_resource, name, patch, namespace=namespace, patch_type=PatchType.JSON)
    except ApiError as err:
        if guarded and _failed_test_operation(err):
            raise StaleView(f"{name}: resourceVersion is no longer {body['metadata']['resourceVersion']}") from err
        raise


def _failed_test_operation(err: ApiError) -> bool:
    """The API server's answer to a JSON patch whose ``test`` operation failed: 422 Invalid with no field
    named (an invalid status is 422 too, but its answer names the fields)."""
    details = err.status.details
    return err.status.code == 422 and not (details and details.causes)


def post_events(body: kopf.Body, events: Iterable[tuple[str, str]], warning: Callable[[str], bool]) -> None:
    """Kubernetes Events on the object, (reason, message) each; Warning for the reasons ``warning`` names.

    Posted after the status is written: a decision whose write meets ``StaleView`` is made again, and its
    Events are told then, once."""
    for reason, message in events:
        kopf.event(body, type="Warning" if warning(reason) else "Normal", reason=reason, message=message)


async def create(client: AsyncClient, manifest: Mapping[str, Any]) -> bool:
    """Create an object a reconciler keeps; one that exists already (409) is there. False when its namespace
    is being deleted: the API server refuses new objects there, and the owner goes with the namespace, so
    there is nothing left to decide (not a warning per ghost while a namespace empties)."""
    try:
        await client.create(from_dict(dict(manifest)))
    except ApiError as err:
        if err.status.code == 409:
            return True
        if _namespace_terminating(err):
            return False
        raise
    return True


def _namespace_terminating(err: ApiError) -> bool:
    causes = (err.status.details and err.status.details.causes) or ()
    return err.status.code == 403 and any(c.reason == "NamespaceTerminating" for c in causes)


async def ignore(code: int, call: Awaitable[Any]) -> None:
    """Await an API call; an error with status ``code`` (e.g. 404 on delete) is success."""
    try:
        await call
    except ApiError as err:
        if err.status.code != code:
            raise
