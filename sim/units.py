"""Memory and CPU amounts as Spark and Flink write them, read into exact Kubernetes quantities.

- Spark memory settings ("512m", "2g", "1024k", "1t"; ``b``, ``k``/``kb``, ``m``/``mb``, ``g``/``gb``,
  ``t``/``tb``, ``p``/``pb``, any case) are binary: "512m" is 512 MiB. A bare number means MiB, as for
  ``spark.executor.memory``. Spark sizes pods in whole MiB, rounding a fraction down.
- Flink memory sizes ("1024m", "1g", "512 mb", "1073741824") are binary too, a bare number meaning bytes;
  the Flink Kubernetes operator also takes a Kubernetes quantity ("1Gi", "1.5G"), read as such when the
  text is not a Flink size.
- CPU: a number of cores (Flink writes a float, Spark an integer) or a Kubernetes quantity ("500m").

Every reader raises ``SpecError`` naming the field, for a spec no real operator could run either.
"""

from __future__ import annotations

import re
from typing import Final

from esi.resources.quantity import Quantity, QuantityError

__all__ = ["MIB", "SpecError", "cpu_quantity", "flink_bytes", "memory_quantity", "spark_mib"]

KIB: Final = 2**10
MIB: Final = 2**20

_SPARK_SIZE: Final = re.compile(r"^\s*([0-9]+)\s*([a-zA-Z]*)\s*$")
_SPARK_UNITS: Final = {
    "b": 1,
    "k": KIB, "kb": KIB,
    "m": MIB, "mb": MIB,
    "g": 2**30, "gb": 2**30,
    "t": 2**40, "tb": 2**40,
    "p": 2**50, "pb": 2**50,
}  # fmt: skip
_FLINK_SIZE: Final = re.compile(r"^\s*([0-9]+)\s*([a-zA-Z]*)\s*$")
_FLINK_UNITS: Final = {
    "": 1, "b": 1, "bytes": 1,
    "k": KIB, "kb": KIB, "kibibytes": KIB,
    "m": MIB, "mb": MIB, "mebibytes": MIB,
    "g": 2**30, "gb": 2**30, "gibibytes": 2**30,
    "t": 2**40, "tb": 2**40, "tebibytes": 2**40,
}  # fmt: skip


class SpecError(ValueError):
    """An application spec the simulated operator cannot turn into pods; the message names the field."""


def spark_mib(value: object, field: str) -> int:
    """A Spark memory setting in whole MiB."""
    text = str(value)
    match = _SPARK_SIZE.match(text)
    if isinstance(value, bool) or match is None:
        raise SpecError(f"{field} is {value!r}, not a Spark memory size such as 512m or 2g")
    number, unit = int(match[1]), match[2].lower()
    if not unit:
        return number
    if unit not in _SPARK_UNITS:
        raise SpecError(f"{field} is {value!r}: unknown unit {match[2]!r} (use b, k, m, g, t or p)")
    return number * _SPARK_UNITS[unit] // MIB


def flink_bytes(value: object, field: str) -> int:
    """A Flink memory size (or a Kubernetes quantity) in bytes."""
    text = str(value)
    match = _FLINK_SIZE.match(text)
    if not isinstance(value, bool) and match is not None and match[2].lower() in _FLINK_UNITS:
        return int(match[1]) * _FLINK_UNITS[match[2].lower()]
    try:
        amount = Quantity(text).amount
    except QuantityError:
        raise SpecError(f"{field} is {value!r}, neither a Flink memory size (1024m, 2g) nor a quantity (2Gi)") from None
    if amount <= 0 or amount != amount.to_integral_value():
        raise SpecError(f"{field} is {value!r}, not a positive whole number of bytes")
    return int(amount)


def memory_quantity(size: int) -> Quantity:
    """``size`` bytes as a binary quantity ("1Gi", "1408Mi"), the form the operators write into pods."""
    return Quantity(f"{size // MIB}Mi") if size % MIB == 0 else Quantity(f"{size}")


def cpu_quantity(value: object, field: str) -> Quantity:
    """A CPU amount: a number of cores (integer or float) or a quantity string ("500m", "1.5")."""
    if isinstance(value, bool):
        raise SpecError(f"{field} is {value!r}, not a number of cores")
    try:
        # A float goes through its shortest text form, as the operators' own number-to-quantity steps do.
        quantity = Quantity(repr(value) if isinstance(value, float) else str(value))
    except QuantityError:
        quantity = None
    if quantity is None or not quantity.is_positive:
        raise SpecError(f"{field} is {value!r}, not a positive number of cores or a quantity such as 500m")
    return quantity
