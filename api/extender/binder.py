"""The extender's bind verb done against the API server: the slot's ghost deleted, then the executor bound.

The rule it follows — exactly the slot's ghost deleted (its UID a precondition, no grace period; not an
eviction), then the executor bound with its slot on the Binding — is docs/design.md#ghost-and-executor-hand-over.
Both writes go through ``kube.pod_writes`` (a lean client: the bind is the extender's hot path).
"""

from __future__ import annotations

import logging

from lightkube import ApiError

from api.extender.slot_index import SlotIndex, key_of
from api.extender.wire import ExtenderBindingArgs, ExtenderBindingResult
from esi.objects.names import SLOT_ANNOTATION
from kube.errors import Refusal, refusal
from kube.pod_writes import PodWriteFailed, PodWrites

__all__ = ["SlotBinder"]

log = logging.getLogger(__name__)


class SlotBinder:
    """Binds the second scheduler's pods: an executor into its slot in place of the slot's ghost."""

    def __init__(self, writes: PodWrites, index: SlotIndex) -> None:
        self._writes = writes
        self._index = index

    async def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        plan = self._index.plan_binding(key_of(args.pod_uid, args.pod_namespace, args.pod_name), args.node)
        if plan.error:
            return ExtenderBindingResult(error=plan.error)
        try:
            if plan.ghost is not None:
                refused = await self._delete_ghost(args.pod_namespace, plan.slot, *plan.ghost)
                if refused is not None:
                    return ExtenderBindingResult(error=refused)
            await self._bind(args, plan.slot)
        except ApiError as err:
            return ExtenderBindingResult(error=f"binding {args.pod_namespace}/{args.pod_name}: {err.status.message}")
        except PodWriteFailed as err:
            return ExtenderBindingResult(error=f"binding {args.pod_namespace}/{args.pod_name}: {err}")
        return ExtenderBindingResult()

    async def _bind(self, args: ExtenderBindingArgs, slot: int | None) -> None:
        """Bind the pod to its node, recording ``slot`` (if given) on it in the same write."""
        annotations = {} if slot is None else {SLOT_ANNOTATION: str(slot)}
        await self._writes.bind(
            args.pod_namespace, args.pod_name, uid=args.pod_uid or None, node=args.node, annotations=annotations
        )

    async def _delete_ghost(self, namespace: str, slot: int | None, name: str, uid: str | None) -> str | None:
        """Delete ghost ``name`` (only if it is ``uid``, when known) of ``slot``; why not, if the binding must
        wait (a ghost already gone is no reason)."""
        try:
            await self._writes.delete_exactly(namespace, name, uid=uid)
        except ApiError as err:
            if refusal(err) is Refusal.NOT_FOUND:
                return None
            if refusal(err) is Refusal.CONFLICT:
                return f"the ghost {namespace}/{name} of slot {slot} was replaced; trying again"
            raise
        seen = "" if uid else ", by its name: not seen here yet"
        log.info("deleted ghost %s/%s (slot %s%s) for the executor bound there", namespace, name, slot, seen)
        return None
