"""Kubernetes resource quantities: parsing, canonical strings, exact arithmetic, pydantic integration."""

from __future__ import annotations

import copy
import math
import pickle
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from esi.resources.quantity import QUANTITY_PATTERN, Quantity, QuantityError, parse_quantity

MAX_UNITS = 2**63 - 1
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# The pattern controller-gen puts on resource.Quantity fields of CRDs: an oracle written by others.
CRD_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
SYNTAX_HINT = "for example 500m, 1.5, 2Gi, 1e3"
# Loaded machine: no per-example deadline; no example database written into the checkout.
PROPERTY = settings(deadline=None, database=None)


def amount(text: str | int | float) -> Fraction:
    return Fraction(parse_quantity(text).amount)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0", "0", id="zero"),
        pytest.param("7", "7", id="integer"),
        pytest.param("+7", "7", id="plus-sign"),
        pytest.param("-7", "-7", id="minus-sign"),
        pytest.param("-0", "0", id="negative-zero"),
        pytest.param("007", "7", id="leading-zeros"),
        pytest.param("1.5", "1.5", id="decimal"),
        pytest.param(".5", "0.5", id="no-integer-part"),
        pytest.param("5.", "5", id="no-fraction-digits"),
        pytest.param("-.25", "-0.25", id="signed-no-integer-part"),
        pytest.param("5n", "0.000000005", id="nano"),
        pytest.param("5u", "0.000005", id="micro"),
        pytest.param("5m", "0.005", id="milli"),
        pytest.param("5k", "5000", id="kilo"),
        pytest.param("5M", "5e6", id="mega"),
        pytest.param("5G", "5e9", id="giga"),
        pytest.param("5T", "5e12", id="tera"),
        pytest.param("5P", "5e15", id="peta"),
        pytest.param("5E", "5e18", id="exa"),
        pytest.param("1.5k", "1500", id="decimal-with-si-suffix"),
        pytest.param("5.M", "5e6", id="trailing-dot-with-suffix"),
        pytest.param("3Ki", str(3 * 2**10), id="kibi"),
        pytest.param("3Mi", str(3 * 2**20), id="mebi"),
        pytest.param("3Gi", str(3 * 2**30), id="gibi"),
        pytest.param("3Ti", str(3 * 2**40), id="tebi"),
        pytest.param("3Pi", str(3 * 2**50), id="pebi"),
        pytest.param("7Ei", str(7 * 2**60), id="exbi"),
        pytest.param("1.5Gi", str(3 * 2**29), id="decimal-with-binary-suffix"),
        pytest.param("1e3", "1000", id="exponent"),
        pytest.param("1E-3", "0.001", id="capital-negative-exponent"),
        pytest.param("2.5e+2", "250", id="explicit-plus-exponent"),
        pytest.param("1.e3", "1000", id="trailing-dot-exponent"),
        pytest.param(".5E1", "5", id="no-integer-part-exponent"),
        pytest.param("1e03", "1000", id="exponent-leading-zero"),
        pytest.param("1E", "1e18", id="bare-E-is-exa-not-exponent"),
        pytest.param("0e99999999999999999999", "0", id="zero-with-huge-exponent"),
        pytest.param("1e-12", "1e-9", id="below-nano-rounds-up"),
        pytest.param("-1e-12", "-1e-9", id="below-nano-rounds-away-from-zero"),
        pytest.param("1e-99999999999", "1e-9", id="tiny-exponent-rounds-up-cheaply"),
        pytest.param("1.0000000001", "1.000000001", id="rounded-up-to-nanos"),
        pytest.param("0.0000000001Ki", "1.03e-7", id="binary-rounded-up-to-nanos"),
        pytest.param("9223372036854775807", str(MAX_UNITS), id="largest"),
        pytest.param("-9223372036854775807", str(-MAX_UNITS), id="most-negative"),
    ],
)
def test_parses_every_kubernetes_form_to_its_exact_amount(text: str, expected: str) -> None:
    assert amount(text) == Fraction(expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(3, "3", id="int"),
        pytest.param(-3, "-3", id="negative-int"),
        pytest.param(0.1, "0.1", id="float-read-as-its-shortest-text"),
        pytest.param(1.5, "1.5", id="float"),
        pytest.param(-0.0, "0", id="negative-zero-float"),
        pytest.param(1e16, "1e16", id="float-printed-with-exponent"),
        pytest.param(5e-324, "1e-9", id="tiny-float-rounds-up"),
    ],
)
def test_parses_python_numbers(value: int | float, expected: str) -> None:
    assert amount(value) == Fraction(expected)
    assert Quantity(value) == parse_quantity(value)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("1.5Gi", "1536Mi", id="binary-fraction-to-smaller-binary-suffix"),
        pytest.param("2048Ki", "2Mi", id="binary-to-largest-binary-suffix"),
        pytest.param("1024Ki", "1Mi", id="binary-exact-power"),
        pytest.param("1023Ki", "1023Ki", id="binary-already-canonical"),
        pytest.param("1.5Ki", "1536", id="binary-without-1024-factor"),
        pytest.param("0.5Ki", "512", id="binary-below-1024-is-decimal"),
        pytest.param("0.9765625Ki", "1k", id="binary-below-1024-takes-decimal-suffix"),
        pytest.param("0.1Ki", "102400m", id="binary-not-whole-is-decimal"),
        pytest.param("-1.5Gi", "-1536Mi", id="negative-binary"),
        pytest.param("7Ei", "7Ei", id="largest-binary-suffix"),
        pytest.param("1500m", "1500m", id="milli-stays"),
        pytest.param("0.5", "500m", id="fraction-to-milli"),
        pytest.param("1.5", "1500m", id="no-decimal-point-in-canonical-form"),
        pytest.param("1000m", "1", id="milli-to-units"),
        pytest.param("1000", "1k", id="units-to-kilo"),
        pytest.param("1500", "1500", id="units-without-1000-factor"),
        pytest.param("1000000n", "1m", id="nano-to-milli"),
        pytest.param("100u", "100u", id="micro-stays"),
        pytest.param("1.5e-3", "1500u", id="exponent-to-micro"),
        pytest.param("1e3", "1k", id="exponent-to-decimal-si"),
        pytest.param("12e6", "12M", id="exponent-to-mega"),
        pytest.param("9000P", "9E", id="largest-decimal-suffix"),
        pytest.param("1e-12", "1n", id="rounded-to-nano"),
        pytest.param("-0.25", "-250m", id="negative-decimal"),
        pytest.param("0Gi", "0", id="binary-zero"),
        pytest.param("-0", "0", id="negative-zero"),
        pytest.param("+5", "5", id="plus-sign-dropped"),
        pytest.param(1024, "1024", id="int-is-decimal"),
        pytest.param(2000, "2k", id="int-to-kilo"),
        pytest.param(0.25, "250m", id="float-to-milli"),
    ],
)
def test_str_is_the_canonical_kubernetes_form(text: str | int | float, canonical: str) -> None:
    quantity = parse_quantity(text)

    assert str(quantity) == canonical
    assert repr(quantity) == f"Quantity({canonical!r})"


def test_adding_decimals_is_exact() -> None:
    total = Quantity("0.1") + Quantity("0.2")

    assert total == Quantity("300m")
    assert str(total) == "300m"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        pytest.param(lambda: Quantity("1Gi") - Quantity("512Mi"), "512Mi", id="binary-difference"),
        pytest.param(lambda: Quantity("250m") * 4, "1", id="times-int"),
        pytest.param(lambda: 3 * Quantity("1Gi"), "3Gi", id="int-times"),
        pytest.param(lambda: Quantity("1Ki") + Quantity("1024"), "2Ki", id="left-family-binary"),
        pytest.param(lambda: Quantity("1024") + Quantity("1Ki"), "2048", id="left-family-decimal"),
        pytest.param(lambda: Quantity("0") + Quantity("1Ki"), "1Ki", id="zero-takes-right-family"),
        pytest.param(lambda: sum([Quantity("1Gi"), Quantity("512Mi"), Quantity("512Mi")]), "2Gi", id="sum"),
        pytest.param(lambda: Quantity("1") - Quantity("1500m"), "-500m", id="negative-result"),
        pytest.param(lambda: Quantity("1n") * 10**9, "1", id="nanos-add-up"),
        pytest.param(lambda: Quantity("1Ei") * 1024, "1024Ei", id="beyond-the-largest-binary-suffix"),
        pytest.param(lambda: Quantity("1E") * 1000, "1000E", id="beyond-the-largest-decimal-suffix"),
    ],
)
def test_arithmetic_is_exact_and_keeps_the_suffix_family(result: Callable[[], object], expected: str) -> None:
    assert str(result()) == expected


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param(lambda: Quantity("1") + 1, id="plus-int"),  # type: ignore[operator]
        pytest.param(lambda: 1 + Quantity("1"), id="int-plus"),
        pytest.param(lambda: Quantity("1") - 0, id="minus-int"),  # type: ignore[operator]
        pytest.param(lambda: Quantity("1") * 1.5, id="times-float"),  # type: ignore[operator]
        pytest.param(lambda: Quantity("1") * Quantity("1"), id="times-quantity"),  # type: ignore[operator]
        pytest.param(lambda: Quantity("1") * True, id="times-bool"),
        pytest.param(lambda: Quantity("1") < 2, id="compare-with-int"),  # type: ignore[operator]
        pytest.param(lambda: Quantity("1") >= "1", id="compare-with-str"),  # type: ignore[operator]
    ],
)
def test_mixing_with_plain_numbers_is_a_type_error(operation: Callable[[], object]) -> None:
    with pytest.raises(TypeError):
        operation()


def test_equality_with_other_types_is_false_not_an_error() -> None:
    assert Quantity("1") != 1
    assert Quantity("1") != "1"


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        pytest.param("1G", "1Gi", id="giga-below-gibi"),
        pytest.param("1k", "1Ki", id="kilo-below-kibi"),
        pytest.param("999m", "1", id="milli-below-one"),
        pytest.param("0", "1n", id="zero-below-nano"),
        pytest.param("-1", "0", id="negative-below-zero"),
        pytest.param("-1Gi", "-1G", id="negative-binary-below-negative-decimal"),
        pytest.param("1Pi", "1E", id="pebi-below-exa"),
        pytest.param("1e2", "1Ki", id="exponent-below-binary"),
    ],
)
def test_ordering_follows_the_value_across_families(smaller: str, larger: str) -> None:
    low, high = Quantity(smaller), Quantity(larger)

    assert low < high
    assert high > low
    assert low <= high
    assert not high <= low
    assert low != high
    assert max(high, low) is high


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param("1000m", "1", id="milli-and-units"),
        pytest.param("1Ki", "1024", id="binary-and-decimal"),
        pytest.param("1e3", "1k", id="exponent-and-si"),
        pytest.param("0.5Gi", "512Mi", id="fraction-and-smaller-suffix"),
        pytest.param("-0", "0", id="signed-zeros"),
    ],
)
def test_equal_values_are_equal_and_hash_alike(left: str, right: str) -> None:
    assert Quantity(left) == Quantity(right)
    assert Quantity(left) >= Quantity(right)
    assert len({Quantity(left), Quantity(right)}) == 1


@pytest.mark.parametrize(
    ("text", "millis", "value"),
    [
        pytest.param("0.25", 250, 1, id="quarter"),
        pytest.param("1", 1000, 1, id="one"),
        pytest.param("1.5", 1500, 2, id="one-and-a-half"),
        pytest.param("1n", 1, 1, id="nano-rounds-up"),
        pytest.param("1000001n", 2, 1, id="just-above-a-milli"),
        pytest.param("2.5e+2", 250_000, 250, id="exponent"),
        pytest.param("1Ki", 1_024_000, 1024, id="binary"),
        pytest.param("0", 0, 0, id="zero"),
        pytest.param("-0.5", -500, -1, id="negative-rounds-away-from-zero"),
        pytest.param("-1n", -1, -1, id="negative-nano"),
    ],
)
def test_millis_and_value_round_up_in_magnitude(text: str, millis: int, value: int) -> None:
    quantity = Quantity(text)

    assert quantity.millis == millis
    assert quantity.value == value
    assert Decimal(quantity.nanos).scaleb(-9) == quantity.amount


def test_amount_is_exact_beyond_decimal_default_precision() -> None:
    largest = Quantity("9223372036854775807")

    assert (largest + Quantity("1n")).amount == Decimal("9223372036854775807.000000001")
    assert largest + Quantity("1n") > largest


@pytest.mark.parametrize(
    ("text", "is_zero", "is_positive"),
    [
        pytest.param("0", True, False, id="zero"),
        pytest.param("0Gi", True, False, id="binary-zero"),
        pytest.param("1n", False, True, id="nano"),
        pytest.param("-1n", False, False, id="negative-nano"),
    ],
)
def test_is_zero_and_is_positive(text: str, is_zero: bool, is_positive: bool) -> None:
    assert Quantity(text).is_zero is is_zero
    assert Quantity(text).is_positive is is_positive


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(" ", id="blank"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("1\n", id="trailing-newline"),
        pytest.param("10 Gi", id="space-before-suffix"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param(".", id="dot-only"),
        pytest.param("+", id="sign-only"),
        pytest.param("--1", id="two-signs"),
        pytest.param("Mi", id="suffix-only"),
        pytest.param(".e3", id="exponent-without-digits"),
        pytest.param("1gi", id="lowercase-binary-suffix"),
        pytest.param("1K", id="capital-kilo"),
        pytest.param("1Kib", id="unit-after-suffix"),
        pytest.param("1Gi1", id="digits-after-suffix"),
        pytest.param("1kk", id="two-suffixes"),
        pytest.param("1e3k", id="exponent-and-suffix"),
        pytest.param("1e", id="exponent-without-digits-is-not-exa"),
        pytest.param("1e+", id="exponent-sign-only"),
        pytest.param("1e1.5", id="fractional-exponent"),
        pytest.param("0x10", id="hexadecimal"),
        pytest.param("1_000", id="underscore"),
        pytest.param("1,5", id="comma"),
        pytest.param("\uff11", id="fullwidth-digit"),
        pytest.param("\u0661", id="arabic-indic-digit"),
        pytest.param("NaN", id="nan-text"),
        pytest.param("inf", id="inf-text"),
        pytest.param("Infinity", id="infinity-text"),
    ],
)
def test_rejects_text_that_is_no_quantity_and_says_what_a_quantity_looks_like(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity(text)

    message = str(caught.value)
    assert message.startswith(f"{text!r} is not a Kubernetes quantity: ")
    assert SYNTAX_HINT in message
    assert caught.value.value == text


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(float("nan"), "finite", id="nan"),
        pytest.param(float("inf"), "finite", id="inf"),
        pytest.param(float("-inf"), "finite", id="negative-inf"),
        pytest.param(True, "not a bool", id="bool"),
        pytest.param(None, "not NoneType", id="none"),
        pytest.param(b"1", "not bytes", id="bytes"),
        pytest.param(Decimal("1"), "not Decimal", id="decimal"),
        pytest.param([1], "not list", id="list"),
        pytest.param("8Ei", "2^63-1", id="binary-above-int64"),
        pytest.param("10E", "2^63-1", id="decimal-above-int64"),
        pytest.param("9223372036854775808", "2^63-1", id="just-above-int64"),
        pytest.param("-9223372036854775808", "2^63-1", id="just-below-minus-int64"),
        pytest.param("9223372036854775807.0000000001", "2^63-1", id="fraction-above-int64"),
        pytest.param("1e99999999999", "2^63-1", id="huge-exponent-without-building-it"),
        pytest.param(2**63, "2^63-1", id="int-above-int64"),
        pytest.param(1e19, "2^63-1", id="float-above-int64"),
        pytest.param("1" * 5000, "digits", id="more-digits-than-python-converts"),
    ],
)
def test_rejects_other_values_with_the_reason(value: object, reason: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value)

    assert str(caught.value).startswith(f"{value!r} is not a Kubernetes quantity: ")
    assert reason in caught.value.reason


def test_quantities_are_immutable_and_survive_pickling_and_copying() -> None:
    quantity = Quantity("1.5Ki")

    with pytest.raises(AttributeError):
        quantity._nanos = 0
    unpickled = pickle.loads(pickle.dumps(quantity))  # noqa: S301 -- bytes this test just made
    for copied in (unpickled, copy.deepcopy(quantity), copy.copy(quantity)):
        assert copied == quantity
        # the binary family survives too: it decides how sums print
        assert str(copied + Quantity("512")) == "2Ki"


def test_parse_quantity_returns_a_quantity_unchanged() -> None:
    quantity = Quantity("1")

    assert parse_quantity(quantity) is quantity


class Executor(BaseModel):
    cpu: Quantity
    memory: Quantity
    limits: dict[str, Quantity] = {}


def test_pydantic_fields_validate_from_str_int_and_float_and_serialize_canonically() -> None:
    executor = Executor.model_validate({"cpu": 0.5, "memory": "1.5Gi", "limits": {"pods": 4}})

    assert executor.cpu == Quantity("500m")
    assert executor.model_dump() == {"cpu": "500m", "memory": "1536Mi", "limits": {"pods": "4"}}
    assert executor.model_dump(mode="json") == executor.model_dump()
    assert executor.model_dump_json() == '{"cpu":"500m","memory":"1536Mi","limits":{"pods":"4"}}'
    assert Executor.model_validate_json(executor.model_dump_json()) == executor


def test_pydantic_reads_json_numbers_as_quantities() -> None:
    executor = Executor.model_validate_json('{"cpu": 0.25, "memory": 1073741824}')

    assert (str(executor.cpu), executor.memory.value) == ("250m", 2**30)


@pytest.mark.parametrize(
    ("data", "location", "bad"),
    [
        pytest.param({"cpu": "1gi", "memory": "1Gi"}, ("cpu",), "'1gi'", id="field"),
        pytest.param({"cpu": "1", "memory": True}, ("memory",), "True", id="bool"),
        pytest.param({"cpu": "1", "memory": "1", "limits": {"gpu": "x"}}, ("limits", "gpu"), "'x'", id="nested"),
    ],
)
def test_pydantic_validation_error_names_the_field_and_the_text(
    data: dict[str, object], location: tuple[str, ...], bad: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Executor.model_validate(data)

    (error,) = caught.value.errors()
    assert error["loc"] == location
    assert f"{bad} is not a Kubernetes quantity" in error["msg"]


@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_json_schema_is_the_kubernetes_crd_quantity_schema(mode: str) -> None:
    properties = Executor.model_json_schema(mode="validation" if mode == "validation" else "serialization")[
        "properties"
    ]
    cpu = {key: value for key, value in properties["cpu"].items() if key != "title"}

    assert cpu == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY_PATTERN,
    }
    assert QUANTITY_PATTERN.startswith("^")
    assert QUANTITY_PATTERN.endswith("$")
    assert properties["limits"]["additionalProperties"]["x-kubernetes-int-or-string"] is True


# --- properties ---------------------------------------------------------------------------------------

FAMILIES = ("plain", "decimal-si", "binary-si", "exponent")


@st.composite
def written_quantities(draw: st.DrawFn, family: str) -> tuple[str, Fraction]:
    """A quantity as someone could write it in ``family``, and its exact value (before nano rounding)."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", max_size=4))
    fraction = draw(st.text("0123456789", max_size=12))
    dot = draw(st.booleans()) or not whole
    if not whole and not fraction:
        whole = "0"
    number = whole + ("." + fraction if dot else "")
    value = Fraction(int(whole or "0")) + (Fraction(int(fraction), 10 ** len(fraction)) if dot and fraction else 0)
    suffix = ""
    if family == "decimal-si":
        suffix = draw(st.sampled_from([s for s in DECIMAL_SUFFIXES if s]))
        value *= Fraction(10) ** DECIMAL_SUFFIXES[suffix]
    elif family == "binary-si":
        suffix = draw(st.sampled_from(list(BINARY_SUFFIXES)))
        value *= 2 ** BINARY_SUFFIXES[suffix]
    elif family == "exponent":
        exponent = draw(st.integers(-30, 20))
        mark = draw(st.sampled_from(["e", "E"]))
        exponent_sign = draw(st.sampled_from(["", "+"] if exponent >= 0 else ["-"]))
        suffix = f"{mark}{exponent_sign}{abs(exponent)}"
        value *= Fraction(10) ** exponent
    assume(abs(value) <= MAX_UNITS)
    return sign + number + suffix, -value if sign == "-" else value


def rounded_to_nanos(value: Fraction) -> Fraction:
    """Kubernetes keeps nanos and rounds finer amounts away from zero."""
    nanos = math.ceil(abs(value) * 10**9)
    return Fraction(-nanos if value < 0 else nanos, 10**9)


any_written_quantity = st.sampled_from(FAMILIES).flatmap(written_quantities)


@PROPERTY
@pytest.mark.parametrize("family", FAMILIES)
@given(data=st.data())
def test_written_quantities_parse_to_their_value_rounded_to_nanos(family: str, data: st.DataObject) -> None:
    text, value = data.draw(written_quantities(family))

    assert re.fullmatch(QUANTITY_PATTERN, text)
    assert amount(text) == rounded_to_nanos(value)


CANONICAL = re.compile(r"(-?)([1-9][0-9]*)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)")


@PROPERTY
@pytest.mark.parametrize("family", FAMILIES)
@given(data=st.data())
def test_str_is_canonical_and_parses_back_equal(family: str, data: st.DataObject) -> None:
    text, _ = data.draw(written_quantities(family))
    quantity = Quantity(text)
    canonical = str(quantity)

    assert Quantity(canonical) == quantity
    assert str(Quantity(canonical)) == canonical
    value = Fraction(quantity.amount)
    if value == 0:
        assert canonical == "0"
        return
    shape = CANONICAL.fullmatch(canonical)
    assert shape, f"{canonical!r} is not an integer mantissa with one suffix"
    sign, mantissa, suffix = shape[1], int(shape[2]), shape[3]
    assert (sign == "-") == (value < 0)
    if family == "binary-si" and value.denominator == 1 and abs(value) >= 1024:
        power = BINARY_SUFFIXES.get(suffix, 0)
        assert suffix in BINARY_SUFFIXES or suffix == ""
        assert mantissa * 2**power == abs(value)
        assert mantissa % 1024 != 0 or suffix == "Ei", "the suffix must be as large as possible"
    else:
        power = DECIMAL_SUFFIXES[suffix]
        assert mantissa * Fraction(10) ** power == abs(value)
        assert mantissa % 1000 != 0 or suffix == "E", "the suffix must be as large as possible"


@PROPERTY
@given(any_written_quantity, any_written_quantity)
def test_arithmetic_is_exact(a: tuple[str, Fraction], b: tuple[str, Fraction]) -> None:
    x, y = Quantity(a[0]), Quantity(b[0])

    assert x + y - y == x
    assert x + y == y + x
    assert Fraction((x + y).amount) == rounded_to_nanos(a[1]) + rounded_to_nanos(b[1])
    assert Fraction((x * 3 - y).amount) == 3 * rounded_to_nanos(a[1]) - rounded_to_nanos(b[1])
    assert sum([x, y]) == x + y


@PROPERTY
@given(any_written_quantity, any_written_quantity)
def test_ordering_agrees_with_the_exact_value(a: tuple[str, Fraction], b: tuple[str, Fraction]) -> None:
    x, y = Quantity(a[0]), Quantity(b[0])
    exact_x, exact_y = rounded_to_nanos(a[1]), rounded_to_nanos(b[1])

    assert (x < y) == (exact_x < exact_y)
    assert (x == y) == (exact_x == exact_y)
    assert (x > y) == (exact_x > exact_y)
    assert (hash(x) == hash(y)) or x != y


QUANTITY_ALPHABET = "0123456789.+-eEinumkKMGTP \n"


@st.composite
def near_quantities(draw: st.DrawFn) -> str:
    """Strings made of quantity characters: random ones, and written quantities with one edit."""
    if draw(st.booleans()):
        return draw(st.text(QUANTITY_ALPHABET, max_size=8))
    text, _ = draw(any_written_quantity)
    position = draw(st.integers(0, len(text)))
    edit = draw(st.sampled_from(["insert", "delete", "replace"]))
    character = draw(st.sampled_from(QUANTITY_ALPHABET))
    if edit == "insert":
        return text[:position] + character + text[position:]
    if edit == "delete":
        return text[:position] + text[position + 1 :]
    return text[:position] + character + text[position + 1 :]


def pattern_accepts(pattern: str, text: str) -> bool:
    # fullmatch, because a Python "$" also matches before a final newline, unlike ECMA-262 and RE2.
    return re.fullmatch(pattern, text) is not None


@PROPERTY
@given(near_quantities())
def test_the_pattern_accepts_exactly_what_the_parser_accepts(text: str) -> None:
    reason = rejection(text)

    # A well-formed quantity out of range (2^63-1) is no matter for a pattern.
    if reason is None or "2^63-1" in reason:
        assert pattern_accepts(QUANTITY_PATTERN, text)
    else:
        assert not pattern_accepts(QUANTITY_PATTERN, text)
        assert SYNTAX_HINT in reason


def rejection(text: str) -> str | None:
    try:
        Quantity(text)
    except QuantityError as error:
        return error.reason
    return None


@PROPERTY
@given(near_quantities())
def test_the_pattern_is_the_crd_pattern_without_fractional_exponents(text: str) -> None:
    fractional_exponent = re.search(r"[eE][+-]?[0-9]*\.", text) is not None

    assert pattern_accepts(QUANTITY_PATTERN, text) == (pattern_accepts(CRD_PATTERN, text) and not fractional_exponent)
