"""Kubernetes resource quantities ("500m", "1.5Gi", "2e3") as exact, comparable values.

A ``Quantity`` holds its amount exactly (no floats anywhere), parses every form that Kubernetes'
``k8s.io/apimachinery`` ``resource.ParseQuantity`` parses, and prints the canonical form Kubernetes
prints, so that what esi writes into a manifest reads back equal. It also works as a pydantic field type
whose JSON schema is the one Kubernetes CRDs use for quantities.

Grammar (``QUANTITY_PATTERN``)::

    quantity ::= sign? number suffix?
    sign     ::= "+" | "-"
    number   ::= digits | digits "." | digits "." digits | "." digits
    suffix   ::= "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"   (powers of 1000)
               | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"              (powers of 1024)
               | ("e" | "E") sign? digits                             (power of ten)

This is where apimachinery's scanner and the pattern that CRDs use for quantities agree: the scanner
also takes text without digits ("Mi", ".", "+") as zero, the CRD pattern also takes fractional exponents
("1e1.5") that the scanner rejects; esi rejects both. "1E" is one exa, "1E3" is a thousand.

Semantics, as in Kubernetes:

- Amounts are kept to the nano (1e-9); finer amounts are rounded away from zero ("1e-12" is "1n"), so
  that asking for a little of a resource never yields none.
- Magnitudes above 2**63-1 are rejected. (Kubernetes documents this bound; its parser silently caps
  binary forms at it and lets others overflow later, esi refuses instead of changing the number.)

Canonical form (``str``): an integer mantissa followed by the largest suffix that keeps it an integer.
Which suffix family is used depends on how the quantity was written, as in Kubernetes:

- written with a binary suffix ("Ki" ... "Ei"): binary suffix if the value is a whole number of at least
  1024 in magnitude ("1.5Gi" -> "1536Mi", "2048Ki" -> "2Mi", "1.5Ki" -> "1536"), else decimal SI
  ("0.5Ki" -> "512", "0.1Ki" -> "102400m");
- anything else: decimal SI ("0.5" -> "500m", "1000m" -> "1", "1500m" -> "1500m", "12e6" -> "12M").
  Unlike Kubernetes, which keeps an exponent written as one ("1e3" stays "1e3"), esi prints decimal
  SI ("1e3" -> "1k"): the value is the same and every reader understands it.
- zero is "0"; a sum or difference keeps the family of its left operand (of the right one if the left
  is zero, so ``sum()`` of binary quantities stays binary), a product that of the quantity.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Context, Decimal
from typing import Any, Final, final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["QUANTITY_PATTERN", "Quantity", "QuantityError", "parse_quantity"]

# One grammar for the parser and for CRD validation, so the two cannot drift apart. Kept to syntax that
# ECMA-262 (OpenAPI), RE2 (kube-apiserver) and Python agree on; [0-9], not \d, which is Unicode in Python.
QUANTITY_PATTERN: Final = (
    r"^([+-])?(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:([KMGTPE]i)|([numkMGTPE])|[eE]([+-]?[0-9]+))?$"
)
_SYNTAX: Final = re.compile(QUANTITY_PATTERN)

_NANOS_PER_UNIT: Final = 10**9
_MAX_UNITS: Final = 2**63 - 1
_MAX_NANOS: Final = _MAX_UNITS * _NANOS_PER_UNIT
# 10**19 > 2**63-1 and 2**60 (Ei) < 10**19: bounds that let the parser decide on digit counts alone
# before building a number, so that exponents like "1e-99999999999" cost nothing.
_MAX_UNIT_DIGITS: Final = 19
_MAX_BINARY_DIGITS: Final = 19

_DECIMAL_EXPONENTS: Final = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENTS: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Canonical-form suffixes, by power of 1000 from nano and by power of 1024 from one.
_DECIMAL_SUFFIXES: Final = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")
_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_EXPECTED: Final = (
    "expected a decimal number with an optional sign and at most one suffix: n u m k M G T P E "
    "(powers of 1000), Ki Mi Gi Ti Pi Ei (powers of 1024) or an integer exponent such as e3 or E-3; "
    "for example 500m, 1.5, 2Gi, 1e3"
)


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message names the value and says why.

    A ``ValueError``, so that pydantic reports it as a validation error at the field's location.
    """

    def __init__(self, value: object, reason: str = _EXPECTED) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"{value!r} is not a Kubernetes quantity: {reason}")


def parse_quantity(value: object) -> Quantity:
    """Return ``value`` as a Quantity: a quantity string, an int, a finite float or a Quantity.

    Takes anything, unlike ``Quantity(...)``, because it is the entry point for untyped input (JSON,
    manifests); everything else raises ``QuantityError``. A float is read as the shortest text that
    round-trips it (``0.1`` is exactly one tenth), which is what Kubernetes sees of a JSON number.
    """
    if isinstance(value, Quantity):
        return value
    nanos, binary = _nanos_of(value)
    return Quantity._of(nanos, binary)


def _nanos_of(value: object) -> tuple[int, bool]:
    """Return the amount of ``value`` in nano-units and whether it was written with a binary suffix."""
    # bool first: it is an int, but True is no quantity.
    if isinstance(value, bool):
        raise QuantityError(value, "expected a quantity string, an int or a finite float, not a bool")
    if isinstance(value, int):
        return _within_bounds(value, value * _NANOS_PER_UNIT), False
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value, "expected a finite number")
        try:
            return _nanos_of_text(repr(value))
        except QuantityError as error:
            raise QuantityError(value, error.reason) from None
    if isinstance(value, str):
        return _nanos_of_text(value)
    raise QuantityError(value, f"expected a quantity string, an int or a finite float, not {type(value).__name__}")


def _nanos_of_text(text: str) -> tuple[int, bool]:
    match = _SYNTAX.fullmatch(text)  # not match(): a Python "$" also matches before a final newline
    if match is None:
        raise QuantityError(text)
    sign, whole, fraction, bare_fraction, binary_suffix, decimal_suffix, exponent_text = match.groups()
    fraction = bare_fraction or fraction or ""
    binary = binary_suffix is not None
    significant = ((whole or "") + fraction).lstrip("0")
    stripped = significant.rstrip("0")
    if not stripped:
        return 0, binary
    try:
        mantissa = int(stripped)
        # value = mantissa * 10**exponent * 2**binary_exponent
        exponent = len(significant) - len(stripped) - len(fraction)
        if exponent_text is not None:
            exponent += int(exponent_text)
    except ValueError:  # Python refuses to convert integers of more than 4300 digits from text
        raise QuantityError(text, "it has more digits than esi handles") from None
    if decimal_suffix is not None:
        exponent += _DECIMAL_EXPONENTS[decimal_suffix]
    binary_exponent = _BINARY_EXPONENTS[binary_suffix] if binary else 0

    if len(stripped) - 1 + exponent >= _MAX_UNIT_DIGITS:
        raise _too_large(text)
    scale = exponent + 9  # to nano-units
    if scale >= 0:
        nanos = (mantissa << binary_exponent) * 10**scale
    elif -scale >= len(stripped) + _MAX_BINARY_DIGITS:
        nanos = 1  # 0 < amount < 1n; as Kubernetes, round up rather than lose a request to nothing
    else:
        nanos = _divide_away_from_zero(mantissa << binary_exponent, 10**-scale)
    return _within_bounds(text, -nanos if sign == "-" else nanos), binary


def _within_bounds(value: object, nanos: int) -> int:
    if abs(nanos) > _MAX_NANOS:
        raise _too_large(value)
    return nanos


def _too_large(value: object) -> QuantityError:
    return QuantityError(value, f"its magnitude exceeds 2^63-1 ({_MAX_UNITS}), the largest Kubernetes allows")


def _divide_away_from_zero(dividend: int, divisor: int) -> int:
    """Kubernetes' rounding: up in magnitude, so that -0.5 millis is -1 milli."""
    quotient, remainder = divmod(abs(dividend), divisor)
    quotient += remainder > 0
    return -quotient if dividend < 0 else quotient


@final
@functools.total_ordering
class Quantity:
    """An exact Kubernetes resource quantity: immutable, hashable, ordered by value.

    ``Quantity("1.5Gi")``, ``Quantity(2)``, ``Quantity(0.25)``. Equality and order compare values only:
    ``Quantity("1000m") == Quantity("1")``. ``str()`` gives the canonical form (see the module
    docstring). Supports ``+`` and ``-`` between quantities, ``*`` by an int, and ``sum()``.
    """

    __slots__ = ("_binary", "_nanos")
    _nanos: int
    _binary: bool

    def __new__(cls, value: str | int | float) -> Quantity:
        return parse_quantity(value)

    @classmethod
    def _of(cls, nanos: int, binary: bool) -> Quantity:
        quantity = object.__new__(cls)
        object.__setattr__(quantity, "_nanos", nanos)
        object.__setattr__(quantity, "_binary", binary)
        return quantity

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Quantity is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Quantity is immutable; cannot delete {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        # __slots__ and the blocked __setattr__ defeat the default pickling and copying.
        return Quantity._of, (self._nanos, self._binary)

    @property
    def amount(self) -> Decimal:
        """The exact amount in units (cores, bytes, ...)."""
        nanos = Decimal(self._nanos)
        # A context as precise as the number itself: scaleb would otherwise round to 28 digits.
        return nanos.scaleb(-9, Context(prec=max(1, len(nanos.as_tuple().digits))))

    @property
    def nanos(self) -> int:
        """The exact amount in billionths of a unit."""
        return self._nanos

    @property
    def millis(self) -> int:
        """The amount in thousandths, rounded away from zero ("0.25" -> 250, "1n" -> 1): for CPU."""
        return _divide_away_from_zero(self._nanos, _NANOS_PER_UNIT // 1000)

    @property
    def value(self) -> int:
        """The amount in units, rounded away from zero ("1.5" -> 2, "1Ki" -> 1024): for bytes, pods."""
        return _divide_away_from_zero(self._nanos, _NANOS_PER_UNIT)

    @property
    def is_zero(self) -> bool:
        return self._nanos == 0

    @property
    def is_positive(self) -> bool:
        return self._nanos > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._of(self._nanos + other._nanos, self._family_with(other))

    def __radd__(self, other: int) -> Quantity:
        # Only so that sum(), which starts from the int 0, works.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._of(self._nanos - other._nanos, self._family_with(other))

    def __mul__(self, factor: int) -> Quantity:
        if not isinstance(factor, int) or isinstance(factor, bool):
            return NotImplemented
        return Quantity._of(self._nanos * factor, self._binary)

    __rmul__ = __mul__

    def _family_with(self, other: Quantity) -> bool:
        # As Kubernetes' Quantity.Add: the receiver's format, unless the receiver is zero.
        return other._binary if self._nanos == 0 else self._binary

    def __str__(self) -> str:
        if self._nanos == 0:
            return "0"
        sign = "-" if self._nanos < 0 else ""
        magnitude = abs(self._nanos)
        units, fraction = divmod(magnitude, _NANOS_PER_UNIT)
        if self._binary and fraction == 0 and units >= 1024:
            power = 0
            while power < len(_BINARY_SUFFIXES) - 1 and units % 1024 == 0:
                units //= 1024
                power += 1
            return f"{sign}{units}{_BINARY_SUFFIXES[power]}"
        power = 0
        while power < len(_DECIMAL_SUFFIXES) - 1 and magnitude % 1000 == 0:
            magnitude //= 1000
            power += 1
        return f"{sign}{magnitude}{_DECIMAL_SUFFIXES[power]}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type[Any], handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            parse_quantity, serialization=core_schema.to_string_ser_schema(when_used="always")
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The schema Kubernetes gives quantities in CRDs (structural: int-or-string, pattern on strings).
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
        }
