"""Kubernetes resource quantities compared by value.

The API server canonicalizes quantities (``"1000m"`` comes back as ``"1"``, ``"1024Mi"`` as
``"1Gi"``), so comparing their text would report false diffs. This module parses the quantity
grammar of ``k8s.io/apimachinery/pkg/api/resource`` into exact decimals; it knows nothing about
where quantities occur (the schemas say that).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

__all__ = ["parse_quantity", "quantities_equal"]

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
        if suffix[:1] in ("e", "E"):
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
