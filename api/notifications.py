"""From cache changes to STOMP messages, on the original ESI's topics and in its payloads.

For every change of a Testbed, BatchJob or Scheduling in a namespace:

* ``/topic/<kind>`` gets ``{"action": ..., "resource": "<name>"}``;
* ``/topic/<kind>/<name>`` gets ``{"action": ..., "resource": <its external view>}``,

``<kind>`` being ``testbeds``, ``jobs`` or ``schedulings`` (docs/compatibility.md#stomp-topics). A MODIFIED
that leaves the external view as it was (a status write of a field the view does not show) is not sent:
subscribers hear of what they can see change, not of every write (docs/compatibility.md#stomp).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from api.cache import Change, Key, Listener
from esi.resources.batchjob import BatchJob
from esi.resources.scheduling import Scheduling
from esi.resources.testbed import Testbed
from esi.wire.rest import ResourceModification, external_batchjob, external_scheduling, external_testbed

__all__ = ["Publisher", "external_view", "notifier"]


class Publisher(Protocol):
    def publish(self, destination: str, body: bytes, namespace: str) -> None: ...


def external_view(resource: Testbed | BatchJob | Scheduling) -> str:
    """The object's external view as JSON (what REST returns for it)."""
    if isinstance(resource, Testbed):
        return external_testbed(resource).model_dump_json()
    if isinstance(resource, BatchJob):
        return external_batchjob(resource).model_dump_json()
    return external_scheduling(resource).model_dump_json()


def notifier(publisher: Publisher, view: Callable[[Testbed | BatchJob | Scheduling], str] = external_view) -> Listener:
    """A cache listener publishing each change to the two topics it concerns."""
    last_sent: dict[tuple[str, Key], str] = {}

    def tell(change: Change) -> None:
        key = (change.kind, (change.namespace, change.name))
        current = view(change.resource)
        if change.action == "DELETED":
            last_sent.pop(key, None)
        elif change.action == "MODIFIED" and last_sent.get(key) == current:
            return
        else:
            last_sent[key] = current
        listing = ResourceModification(action=change.action, resource=change.name).model_dump_json()
        # the view is already JSON: spliced in rather than parsed and dumped again
        detail = f'{{"action":"{change.action}","resource":{current}}}'
        publisher.publish(f"/topic/{change.kind}", listing.encode(), change.namespace)
        publisher.publish(f"/topic/{change.kind}/{change.name}", detail.encode(), change.namespace)

    return tell
