"""The API's run table: every namespace's Runs (``esi.resources.run``), from a watch, as rows.

``GET /external/runs`` answers from here (``api.routes.runs``). A Run is the researcher's data and there may be
100,000 of them per namespace (the default retention), so the store keeps each as a ``RunRow`` — no model, no
raw object — and each row rendered for export once (``esi.results.table.RenderedRuns``).

A Run's spec never changes (the API server refuses it), so an object seen again — in a relist, or a watch
event for its labels' change — is read again only when its labels differ; a Run that does not validate against
esi's model (written by another version of esi) is left out with a warning. The REST side is ready without the
runs: the route answers 503 until the first list is in (a list of 100,000 takes seconds). The list comes a
chunk at a time (``kube.watch.PiecewiseStream``): 100,000 Runs are never held as objects at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

from pydantic import ValidationError

from esi.resources.run import Run
from esi.results.table import RenderedRuns, RunRow, run_row
from esi.wire.rest import field_problems
from kube.resources import RunResource
from kube.watch import PiecewiseStream

__all__ = ["RunStore", "run_stream"]

log = logging.getLogger(__name__)

WHAT: Final = "runs"


class RunStore:
    """The rows of every Run seen, kept by a ``kube.watch.Stream`` (a ``Consumer``)."""

    def __init__(self) -> None:
        self.rendered = RenderedRuns()
        self.synced = False  # a complete list has been seen

    def listed(self, objects: Sequence[Mapping[str, Any]]) -> None:
        for obj in objects:
            self.observed(obj)
        self.relisted({_key(obj) for obj in objects})

    def relisted(self, keys: AbstractSet[tuple[str, str]]) -> None:
        for row in [row for row in self.rendered.table if row.key not in keys]:
            self.rendered.remove(row.namespace, row.name)
        self.synced = True

    def observed(self, obj: Mapping[str, Any]) -> RunRow | None:
        metadata = obj.get("metadata") or {}
        known = self.rendered.table.get(*_key(obj))
        if known is not None and dict(known.labels) == (metadata.get("labels") or {}):
            return known  # the same Run: its spec never changes
        try:
            row = run_row(Run.model_validate(obj))
        except ValidationError as err:
            first = field_problems(err, whole="(object)")[0]
            log.warning(
                "Run %s/%s is left out: it does not read as esi's Run (%d problems, first: %s at %s)",
                metadata.get("namespace"),
                metadata.get("name"),
                err.error_count(),
                first.problem,
                first.field,
            )
            return None
        self.rendered.put(row)
        return row

    def deleted(self, obj: Mapping[str, Any]) -> None:
        self.rendered.remove(*_key(obj))


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def run_stream(store: RunStore) -> PiecewiseStream:
    """The Runs of every namespace, told to ``store`` as each chunk of a list arrives."""
    stream = PiecewiseStream(WHAT, RunResource)
    stream.tell(store)
    return stream
