"""kopf indexes with types: the caches kopf fills from its watches, read without string keys.

kopf hands every index to every handler as a keyword argument named after the index function. Reading them
as ``indexes["testbed_tables"]`` ties a handler to a function name in another module and types nothing.
``@index(...)`` registers the function with kopf as ``@kopf.index(...)`` does and puts a ``KopfIndex`` in
its place, which knows that name and the types of the function's keys and values::

    @index(GROUP, VERSION, "testbeds")
    def testbed_tables(*, name: str, namespace: str | None, **_: Any) -> dict[Key, TestbedTable]: ...

    tables = testbed_tables.of(kwargs)  # kopf.Index[Key, TestbedTable]; a rename or a wrong type is mypy's
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import kopf

__all__ = ["KopfIndex", "index"]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class KopfIndex(Generic[K, V]):
    """One kopf index: the name kopf passes it under, and the types of its keys and values."""

    name: str

    def of(self, kwargs: Mapping[str, Any]) -> kopf.Index[K, V]:
        """This index among the keyword arguments kopf passed a handler."""
        found: kopf.Index[K, V] = kwargs[self.name]
        return found


def index(
    group: str, version: str, plural: str, *, labels: Mapping[str, Any] | None = None
) -> Callable[[Callable[..., Mapping[K, V]]], KopfIndex[K, V]]:
    """``@kopf.index(group, version, plural, labels=...)``, leaving a typed ``KopfIndex`` in the function's place.

    The function answers ``{}`` when an object no longer belongs in the index: kopf keeps an object's
    earlier entries when it answers None. It is pure and quick, so kopf calls it in its event loop (kopf runs a
    plain function in a thread of its pool, a hop per object per event)."""

    def decorator(fn: Callable[..., Mapping[K, V]]) -> KopfIndex[K, V]:
        name = fn.__qualname__  # kopf's name for a handler function, and the keyword it passes the index under

        async def in_loop(**kwargs: Any) -> Mapping[K, V]:
            return fn(**kwargs)

        kopf.index(group, version, plural, labels=labels, id=name)(in_loop)
        return KopfIndex(name)

    return decorator
