"""From cache changes to STOMP messages, on the original ESI's topics and in its payloads.

For every change of a Testbed, BatchJob or Scheduling in a namespace:

* ``/topic/<kind>`` gets ``{"action": ..., "resource": "<name>"}``;
* ``/topic/<kind>/<name>`` gets ``{"action": ..., "resource": <its view>}``,

``<kind>`` being ``testbeds``, ``jobs`` or ``schedulings`` (docs/compatibility.md#stomp-topics), each in the
view its subscribers asked for (``esi.wire.rest.View``). A MODIFIED that leaves a view as it was (a status
write of a field the view does not show) is not sent to that view's subscribers: they hear of what they can
see change, not of every write (docs/compatibility.md#stomp).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

from api.cache import Change, Key, Listener
from esi.resources.batchjob import BatchJob
from esi.resources.scheduling import Scheduling
from esi.resources.testbed import Testbed
from esi.wire.rest import (
    ExternalBatchJob,
    ExternalScheduling,
    ExternalTestbed,
    ResourceModification,
    View,
    external_batchjob,
    external_scheduling,
    external_testbed,
    view_json,
)

__all__ = ["Publisher", "external_view", "notifier"]


class Publisher(Protocol):
    def publish(self, destination: str, body: bytes, namespace: str, view: View = ...) -> None: ...


def external_view(resource: Testbed | BatchJob | Scheduling) -> ExternalTestbed | ExternalBatchJob | ExternalScheduling:
    """The object's view (what REST returns for it)."""
    if isinstance(resource, Testbed):
        return external_testbed(resource)
    if isinstance(resource, BatchJob):
        return external_batchjob(resource)
    return external_scheduling(resource)


def notifier(
    publisher: Publisher,
    view: Callable[[Testbed | BatchJob | Scheduling], ExternalTestbed | ExternalBatchJob | ExternalScheduling] = (
        external_view
    ),
) -> Listener:
    """A cache listener publishing each change to the two topics it concerns, in each view."""
    # A digest of what each view's subscribers last heard of each object: enough to tell "unchanged".
    last_sent: dict[tuple[str, Key, View], bytes] = {}

    def tell(change: Change) -> None:
        current = view(change.resource)
        listing = ResourceModification(action=change.action, resource=change.name).model_dump_json().encode()
        for shown in View:
            key = (change.kind, (change.namespace, change.name), shown)
            body = view_json(current, shown)
            digest = hashlib.blake2b(body, digest_size=16).digest()
            if change.action == "DELETED":
                last_sent.pop(key, None)
            elif change.action == "MODIFIED" and last_sent.get(key) == digest:
                continue
            else:
                last_sent[key] = digest
            # the view is already JSON: spliced in rather than parsed and dumped again
            detail = b'{"action":"' + change.action.encode() + b'","resource":' + body + b"}"
            publisher.publish(f"/topic/{change.kind}", listing, change.namespace, shown)
            publisher.publish(f"/topic/{change.kind}/{change.name}", detail, change.namespace, shown)

    return tell
