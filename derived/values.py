"""What the expression language does with values (the semantics, separate from syntax).

Values are the event's typed JSON (``None``, ``bool``, ``int``, ``float``, ``str``, lists,
objects) plus ``Decimal`` for exact arithmetic. A PostgreSQL ``numeric`` arrives as a
string of digits: arithmetic and comparisons with a number read such a string as an
exact ``Decimal``; a string that is not a number makes the result ``NULL`` (like Spark
SQL's cast of a malformed string). Nothing here raises on data: errors become ``NULL``.
"""

from __future__ import annotations

import re
from decimal import Decimal, DivisionByZero, InvalidOperation, localcontext
from typing import Any

import orjson

Number = int | float | Decimal

DECIMAL_PRECISION = 38  # Spark's (and a wide PostgreSQL numeric's) digits
_NUMERIC_TEXT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|NaN|Infinity)")


def as_number(value: Any) -> Number | None:
    """``value`` as a number, or ``None`` (booleans are not numbers; numeric text is)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value):
        return Decimal(value)
    return None


def text_of(value: Any) -> str:
    """The text form of a non-null value, as ``concat`` and ``lower`` see it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def json_value(value: Any) -> Any:
    """An evaluation result as it goes into a document: ``Decimal`` becomes exact text
    (the event's own notation for ``numeric``); everything else is already JSON."""
    return format(value, "f") if isinstance(value, Decimal) else value


def _is_nan(value: Number) -> bool:
    return value != value  # true only for float and Decimal NaN


def arithmetic(op: str, left: Any, right: Any) -> Number | None:
    """``left op right`` for ``+ - * /``: int with int stays int (``/`` gives a Decimal),
    any float makes a float, otherwise exact Decimal; ``NULL`` on null, text that is not
    a number, or division by zero."""
    x, y = as_number(left), as_number(right)
    if x is None or y is None:
        return None
    if isinstance(x, float) or isinstance(y, float):
        return _float_arithmetic(op, float(x), float(y))
    if isinstance(x, int) and isinstance(y, int) and op != "/":
        return x + y if op == "+" else x - y if op == "-" else x * y
    with localcontext() as context:
        context.prec = DECIMAL_PRECISION
        context.traps[DivisionByZero] = True
        context.traps[InvalidOperation] = True
        try:
            a, b = Decimal(x), Decimal(y)
            if op == "/":
                return a / b if b else None
            return a + b if op == "+" else a - b if op == "-" else a * b
        except (InvalidOperation, DivisionByZero):
            return None


def _float_arithmetic(op: str, x: float, y: float) -> float | None:
    if op == "/":
        return x / y if y else None
    return x + y if op == "+" else x - y if op == "-" else x * y


def negate(value: Any) -> Number | None:
    """``-value``, or ``NULL`` when it is not a number."""
    number = as_number(value)
    return None if number is None else -number


def compare(op: str, left: Any, right: Any) -> bool | None:
    """``left op right`` for ``= != < <= > >=``; ``NULL`` when either side is null, NaN,
    or the two cannot be compared (a number and text that is not a number, a boolean and
    a number, ...). Text compares by code point, like Spark's UTF-8 byte order."""
    pair = _comparable(left, right)
    if pair is None:
        return None
    a, b = pair
    try:
        if op == "=":
            return bool(a == b)
        if op == "!=":
            return bool(a != b)
        if op == "<":
            return bool(a < b)
        if op == "<=":
            return bool(a <= b)
        if op == ">":
            return bool(a > b)
        return bool(a >= b)
    except TypeError:  # lists or objects ordered with < or >
        return None


def _comparable(left: Any, right: Any) -> tuple[Any, Any] | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        return (left, right) if isinstance(left, bool) and isinstance(right, bool) else None
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    if isinstance(left, int | float | Decimal) or isinstance(right, int | float | Decimal):
        x, y = as_number(left), as_number(right)
        if x is None or y is None or _is_nan(x) or _is_nan(y):
            return None
        return x, y
    if type(left) is type(right):
        return left, right
    return None
