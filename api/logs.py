"""Structured logs: one JSON object per line (``--log-format json``, the default) or plain text for people.

Every record carries ``time``, ``level``, ``logger`` and ``message``; the access log adds ``method``,
``path``, ``route``, ``status``, ``duration_ms`` and ``principal`` as fields of their own, so a log pipeline
can filter on them without parsing the message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

__all__ = ["JsonFormatter", "access", "configure"]

ACCESS: Final = logging.getLogger("esi.access")
_STANDARD: Final = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str, form: Literal["json", "text"]) -> None:
    handler = logging.StreamHandler()
    if form == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def access(scope: Mapping[str, Any], route: str | None, status: int, seconds: float) -> None:
    """One record on ``esi.access``: who asked what, the answer's status and how long it took."""
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    state = scope.get("state") or {}
    principal = state.get("principal")
    fields = {
        "method": scope["method"],
        "path": scope["path"],
        "route": route,
        "status": status,
        "duration_ms": round(seconds * 1000, 2),
        "principal": getattr(principal, "name", None),
    }
    ACCESS.info("%s %s %s", scope["method"], scope["path"], status, extra=fields)
