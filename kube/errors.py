"""The API server's refusals, told apart in one place.

lightkube raises one exception, ``ApiError``, for every refusal; what it means is in its ``Status``: the HTTP
code and, for some, a cause. ``refusal`` reads that once into a ``Refusal``, and the shells (operators,
API, simulator) decide on the ``Refusal``, never on a number::

    Refusal
    ├── BAD_REQUEST             400
    ├── UNAUTHORIZED            401
    ├── FORBIDDEN               403
    ├── NAMESPACE_TERMINATING   403, cause NamespaceTerminating: no new objects in a namespace being deleted
    ├── NOT_FOUND               404
    ├── CONFLICT                409: exists already, or changed since the resourceVersion a write carried
    ├── GONE                    410: a watch's resourceVersion is too old to follow from
    ├── INVALID                 422 naming the fields at fault
    ├── TEST_FAILED             422 naming no field: a JSON patch's ``test`` operation failed
    └── OTHER                   anything else (5xx, 429, …)
"""

from __future__ import annotations

from collections.abc import Awaitable
from enum import Enum
from typing import Any

from lightkube import ApiError

__all__ = ["Refusal", "ignore", "refusal"]


class Refusal(Enum):
    """What a refusal of the API server means to esi."""

    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    NAMESPACE_TERMINATING = "NamespaceTerminating"
    NOT_FOUND = "NotFound"
    CONFLICT = "Conflict"
    GONE = "Gone"
    INVALID = "Invalid"
    TEST_FAILED = "TestFailed"
    OTHER = "Other"

    @property
    def of_the_request(self) -> bool:
        """The request itself is refused (malformed, invalid, or not allowed), not the object's state:
        sent again unchanged, it is refused again."""
        return self in _OF_THE_REQUEST


_OF_THE_REQUEST = frozenset(
    {
        Refusal.BAD_REQUEST,
        Refusal.FORBIDDEN,
        Refusal.NAMESPACE_TERMINATING,
        Refusal.INVALID,
        Refusal.TEST_FAILED,
    }
)
_BY_CODE = {
    400: Refusal.BAD_REQUEST,
    401: Refusal.UNAUTHORIZED,
    403: Refusal.FORBIDDEN,
    404: Refusal.NOT_FOUND,
    409: Refusal.CONFLICT,
    410: Refusal.GONE,
    422: Refusal.INVALID,
}


def refusal(err: ApiError) -> Refusal:
    """What ``err`` means: its status code, told apart further by the causes the API server named."""
    status = err.status
    meaning = _BY_CODE.get(status.code or 0, Refusal.OTHER)
    causes = (status.details and status.details.causes) or ()
    if meaning is Refusal.FORBIDDEN and any(cause.reason == "NamespaceTerminating" for cause in causes):
        return Refusal.NAMESPACE_TERMINATING
    if meaning is Refusal.INVALID and not causes:  # an invalid object's answer names its fields
        return Refusal.TEST_FAILED
    return meaning


async def ignore(expected: Refusal, call: Awaitable[Any]) -> None:
    """Await an API call; a refusal that means ``expected`` (e.g. NOT_FOUND on a delete) is success."""
    try:
        await call
    except ApiError as err:
        if refusal(err) is not expected:
            raise
