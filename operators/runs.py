"""Retention of Runs: every ``PRUNE_EVERY`` the operators list the Runs of the whole cluster, by their metadata
only (``kube.metadata``: names and creation times are all that retention reads), and delete those the retention
setting lets go (``esi.objects.runs.runs_to_prune``: the oldest beyond the count kept per namespace, and those
older than the age kept). Runs are written by the BatchJob reconciler (``operators.batchjob``); nothing else
deletes them.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any, Final

import httpx2
import kopf
from lightkube import ALL_NS, ApiError, AsyncClient

from esi.objects.runs import KeptRun, Retention, runs_to_prune
from esi.resources.meta import utc_now
from kube.errors import Refusal, ignore
from kube.metadata import list_metadata
from kube.resources import RunResource

__all__ = ["PRUNE_EVERY", "prune_runs"]

PRUNE_EVERY: Final = 300.0  # seconds between two rounds of pruning
_log = logging.getLogger(__name__)


async def prune_runs(client: AsyncClient, retention: Retention, *, now: datetime, namespace: str = ALL_NS) -> int:
    """Delete the Runs ``retention`` lets go (of every namespace, or of ``namespace``); how many went."""
    kept: list[KeptRun] = []
    async for run in list_metadata(client, RunResource, namespace=namespace):
        metadata = run.metadata
        if metadata is None or metadata.name is None or metadata.creationTimestamp is None:
            continue
        kept.append(KeptRun(metadata.namespace or "", metadata.name, metadata.creationTimestamp))
    pruned = runs_to_prune(kept, retention, now=now)
    for gone in pruned:
        await ignore(Refusal.NOT_FOUND, client.delete(RunResource, gone.name, namespace=gone.namespace))
    return len(pruned)


async def _prune_forever(memo: kopf.Memo, retention: Retention, every: float) -> None:
    while True:
        try:
            if pruned := await prune_runs(memo.client, retention, now=utc_now()):
                _log.info(f"retention deleted {pruned} runs")
        except ApiError as err:  # tried again next round
            _log.warning(f"pruning runs: {err.status.message}")
        except httpx2.TransportError as err:  # the API server away: tried again next round
            _log.warning(f"pruning runs: {err}")
        await asyncio.sleep(every)


@kopf.on.startup()  # after operators.daemons' (imported before), which gives the memo its client
async def _start_pruning(memo: kopf.Memo, **_: Any) -> None:
    retention = memo.get("retention", Retention())
    memo.pruning = asyncio.create_task(_prune_forever(memo, retention, memo.get("prune_every", PRUNE_EVERY)))


@kopf.on.cleanup()
async def _stop_pruning(memo: kopf.Memo, **_: Any) -> None:
    memo.pruning.cancel()
    await asyncio.wait([memo.pruning])  # not awaited: that would swallow a cancellation of this handler
