"""Kubernetes resource quantities compared by value.

The API server canonicalizes quantities (``"1000m"`` comes back as ``"1"``, ``"1024Mi"`` as
``"1Gi"``), so comparing their text would report false diffs. This module parses the quantity
grammar of ``k8s.io/apimachinery/pkg/api/resource`` into exact decimals, and writes the canonical
text the server stores (:func:`canonical_quantity`, which the embedded API server uses to answer
like a real one); it knows nothing about where quantities occur (the schemas say that).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from objectmatcher._errors import InvalidQuantityError

__all__ = ["canonical_quantity", "parse_quantity", "quantities_equal"]

_SUFFIXES: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}

_QUANTITY: Final = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?"
)


def parse_quantity(value: Any) -> Decimal | None:
    """The exact value of a quantity (``"1Gi"``, ``"250m"``, ``"1e3"``, ``2``), or ``None``.

    ``None`` means the value is not a quantity at all (then it compares as plain JSON).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix not in _SUFFIXES:
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation:
        return None


def quantities_equal(left: Any, right: Any) -> bool:
    """Whether two quantities are equal by value: ``"1000m"`` == ``"1"``, ``"1Gi"`` == ``"1024Mi"``.

    Values that do not parse as quantities are compared as they are.
    """
    if left == right and type(left) is type(right):
        return True
    a, b = parse_quantity(left), parse_quantity(right)
    if a is None or b is None:
        return bool(left == right and not isinstance(left, bool) and not isinstance(right, bool))
    return a == b


# --- canonical form ------------------------------------------------------------------------------
#
# A port of ParseQuantity + CanonicalizeBytes (k8s.io/apimachinery/pkg/api/resource/quantity.go,
# amount.go, suffix.go). Values are kept as ``unscaled * 10**exponent`` integer pairs, never as
# expanded powers, so ``"1e999999999"`` costs no more than ``"1e3"``.

_DECIMAL_FORMAT: Final = "DecimalSI"
_BINARY_FORMAT: Final = "BinarySI"
_EXPONENT_FORMAT: Final = "DecimalExponent"

_DECIMAL_SUFFIX_EXPONENTS: Final[dict[str, int]] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_EXPONENT_SUFFIXES: Final[dict[int, str]] = {
    exponent: suffix for suffix, exponent in _DECIMAL_SUFFIX_EXPONENTS.items()
}
_BINARY_SUFFIX_EXPONENTS: Final[dict[str, int]] = {
    "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60,
}
_BINARY_EXPONENT_SUFFIXES: Final[dict[int, str]] = {
    exponent // 10: suffix for suffix, exponent in _BINARY_SUFFIX_EXPONENTS.items()
}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")
_MAX_INT64: Final = 2**63 - 1
_NANO: Final = -9
_MAX_INT64_DIGITS: Final = 18


def canonical_quantity(value: str | int | float) -> str:
    """The text a real kube-apiserver stores for the quantity ``value``.

    Follows apimachinery's ``resource.Quantity`` exactly: the format family of the suffix is kept
    (binary SI ``Ki``..``Ei``, decimal SI ``n``..``E``, decimal exponent ``e<n>``), the number is
    rounded up to nano units, the exponent is made as large as possible without fractional digits
    (``"0.5"`` -> ``"500m"``, ``"1024Mi"`` -> ``"1Gi"``, ``"1000m"`` -> ``"1"``, ``"1.5Gi"`` ->
    ``"1536Mi"``, ``"1e3"`` stays ``"1e3"``, ``"100M"`` stays), a binary value below 1024 or with a
    fraction falls back to decimal SI, and binary values are capped at 2**63-1. Like the server,
    input already written in canonical form is returned as given (``"+1k"`` stays ``"+1k"``), and
    surrounding whitespace is dropped (``Quantity.UnmarshalJSON`` trims it).

    Raises :class:`InvalidQuantityError` (a ``ValueError``) for what the server rejects.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidQuantityError(value, reason="not a string or number")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidQuantityError(value, reason="not a finite number")
        text = repr(value)
    elif isinstance(value, int):
        text = str(value)
    else:
        text = value.strip()
    if not text:
        raise InvalidQuantityError(value, reason="empty")
    if text == "0":
        return "0"
    negative, number, whole, fraction, suffix = _split_quantity(text, value)
    base, exponent, fmt = _interpret_suffix(suffix, value)
    fast = _fast_path(text, whole=whole, fraction=fraction, base=base, exponent=exponent, fmt=fmt)
    if fast is not None:
        return fast
    unscaled, scale = _slow_path(number, negative=negative, base=base, exponent=exponent, fmt=fmt)
    return _canonicalize(unscaled, scale, fmt)


def _split_quantity(text: str, original: object) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: sign, the signed number text, whole digits, fraction, suffix."""
    negative = False
    pos, end = 0, len(text)
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return negative, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    number = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise InvalidQuantityError(original, reason="does not match <number><suffix>")
    return negative, number, whole, fraction, text[suffix_start:]


def _interpret_suffix(suffix: str, original: object) -> tuple[int, int, str]:
    """``suffixHandler.interpret``: (base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIX_EXPONENTS:
        return 10, _DECIMAL_SUFFIX_EXPONENTS[suffix], _DECIMAL_FORMAT
    if suffix in _BINARY_SUFFIX_EXPONENTS:
        return 2, _BINARY_SUFFIX_EXPONENTS[suffix], _BINARY_FORMAT
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if body and all(char in _DIGITS for char in body):
            parsed = int(digits)
            if -(2**63) <= parsed < 2**63:
                # Go truncates the int64 exponent to int32.
                wrapped = (parsed + 2**31) % 2**32 - 2**31
                return 10, wrapped, _EXPONENT_FORMAT
    raise InvalidQuantityError(original, reason=f"unknown suffix {suffix!r}")


def _fast_path(
    text: str, *, whole: str, fraction: str, base: int, exponent: int, fmt: str
) -> str | None:
    """The int64 parse path, which keeps input that is already canonical verbatim.

    ``None`` when Go would take the arbitrary-precision path (too many digits, below nano units,
    overflow) or the input is not in canonical form (then the value is canonicalized normally).
    """
    if fmt == _BINARY_FORMAT:
        if fraction:
            return None
        # Go: precision = 15 - len(num) - int32(float32(exponent)*3/10) - 1
        if 15 - len(whole) - (exponent * 3) // 10 - 1 < 0:
            return None
        value = int(whole)
        if value << exponent > _MAX_INT64:
            return None
        return text if value & 0x07 != 0 else None
    if _MAX_INT64_DIGITS - len(whole) - len(fraction) < 0:
        return None
    scale = exponent - len(fraction)
    if scale < _NANO:
        return None
    shifted = whole + fraction
    if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
        return text
    return None


def _slow_path(
    number: str, *, negative: bool, base: int, exponent: int, fmt: str
) -> tuple[int, int]:
    """The value as ``(unscaled, scale)`` (value = unscaled * _pow10(scale)), rounded and capped."""
    digits = number.lstrip("+-")
    whole, _, fraction = digits.partition(".")
    unscaled = int((whole or "0") + fraction)
    scale = -len(fraction)
    if base == 10:
        scale += exponent
    else:
        unscaled <<= exponent
    if unscaled != 0 and scale < _NANO:
        unscaled, scale = _round_up_to_nano(unscaled, scale)
    if fmt == _BINARY_FORMAT and _exceeds_int64(unscaled, scale):
        unscaled, scale = _MAX_INT64, 0
    return (-unscaled if negative else unscaled), scale


def _pow10(exponent: int) -> int:
    """``10**exponent`` for a non-negative exponent, typed as ``int``."""
    return int(10**exponent)


def _round_up_to_nano(unscaled: int, scale: int) -> tuple[int, int]:
    """Round a positive ``unscaled * 10**scale`` away from zero to a multiple of 10**-9."""
    drop = _NANO - scale
    if drop > len(str(unscaled)):
        return 1, _NANO
    quotient, remainder = divmod(unscaled, _pow10(drop))
    return quotient + (1 if remainder else 0), _NANO


def _exceeds_int64(unscaled: int, scale: int) -> bool:
    """Whether the non-negative ``unscaled * _pow10(scale)`` is above 2**63-1."""
    if unscaled == 0:
        return False
    if scale >= 0:
        return scale > 19 or unscaled * _pow10(scale) > _MAX_INT64
    return unscaled > _MAX_INT64 * _pow10(-scale)


def _abs_below(unscaled: int, scale: int, limit: int) -> bool:
    """Whether ``|unscaled * _pow10(scale)| < limit``."""
    if scale >= 0:
        return scale < 5 and abs(unscaled) * _pow10(scale) < limit
    return abs(unscaled) < limit * _pow10(-scale)


def _canonicalize(unscaled: int, scale: int, fmt: str) -> str:
    """``CanonicalizeBytes``: mantissa and suffix of the value in its format family."""
    if unscaled == 0:
        return "0"
    if fmt == _BINARY_FORMAT:
        integral = scale >= 0 or unscaled % _pow10(-scale) == 0
        if _abs_below(unscaled, scale, 1024) or not integral:
            fmt = _DECIMAL_FORMAT
        else:
            value = unscaled * _pow10(scale) if scale >= 0 else unscaled // _pow10(-scale)
            times = 0
            while value % 1024 == 0:
                value //= 1024
                times += 1
            return f"{value}{_BINARY_EXPONENT_SUFFIXES.get(times, '')}"
    sign = "-" if unscaled < 0 else ""
    mantissa = abs(unscaled)
    text = str(mantissa)
    trimmed = text.rstrip("0")
    scale += len(text) - len(trimmed)
    mantissa = int(trimmed)
    shift = scale % 3
    mantissa *= _pow10(shift)
    scale -= shift
    if fmt == _EXPONENT_FORMAT:
        suffix = "" if scale == 0 else f"e{scale}"
    else:
        # Go finds no decimal SI suffix above E (10**18) and then writes none at all.
        suffix = _DECIMAL_EXPONENT_SUFFIXES.get(scale, "")
    return f"{sign}{mantissa}{suffix}"
