"""The Kubernetes Events a decision tells: what happened, and whether a person should look at it.

A decision says an Event's severity where it decides the Event; the reconciler posts it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Event"]


@dataclass(frozen=True)
class Event:
    """One Kubernetes Event on the decided object: a CamelCase ``reason`` and a sentence for people."""

    reason: str
    message: str
    warning: bool = False  # something is wrong that a person may have to fix

    @property
    def type(self) -> Literal["Normal", "Warning"]:
        """The Event's ``type`` as Kubernetes spells it."""
        return "Warning" if self.warning else "Normal"
