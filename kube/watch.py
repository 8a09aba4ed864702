"""Following a kind of object from the API server: LIST, then WATCH from the list's resourceVersion, forever.

A relist is the repair for anything missed while not watching, so every failure ends in one: at once after
``410 Gone`` (the watch fell too far behind), after capped exponential backoff for anything else. ``follow``
never gives up and never lets an error out; it ends only when cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lightkube import ApiError

__all__ = ["follow"]

log = logging.getLogger(__name__)


async def follow(
    what: str,
    relist: Callable[[], Awaitable[str]],
    watch: Callable[[str], Awaitable[None]],
    *,
    min_backoff: float = 0.5,
    max_backoff: float = 30.0,
) -> None:
    """``relist()`` returns the list's resourceVersion, ``watch(version)`` follows from there."""
    loop = asyncio.get_running_loop()
    delay = min_backoff
    while True:
        started = loop.time()
        try:
            await watch(await relist())
        except ApiError as err:
            if err.status.code == 410:
                log.info("%s: watch expired (410 Gone), listing again", what)
                continue
            log.warning(
                "%s: the API server refused (%s %s), listing again in %.1fs",
                what,
                err.status.code,
                err.status.message,
                delay,
            )
        except Exception as err:  # any other failure: the next list repairs what was missed
            log.warning(
                "%s: %s: %s, listing again in %.1fs",
                what,
                type(err).__name__,
                err,
                delay,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
        else:  # not expected: lightkube renews a watch the server closed
            log.warning("%s: the watch ended, listing again in %.1fs", what, delay)
        if loop.time() - started > max_backoff:  # it worked for a while: start over gently
            delay = min_backoff
        await asyncio.sleep(delay)
        delay = min(2 * delay, max_backoff)
