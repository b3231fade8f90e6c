"""Evaluation: a parsed expression compiled once into Python closures over a row.

Logic is SQL's three-valued logic (``NULL AND FALSE`` is false, ``NULL OR TRUE`` is true,
anything else with ``NULL`` is ``NULL``); a non-boolean operand of AND/OR/NOT counts as
``NULL``. Functions (Spark SQL's, with Spark's null rules):

- ``concat(a, ...)``: the text forms joined; ``NULL`` if any argument is ``NULL``
- ``concat_ws(sep, a, ...)``: joined with ``sep``, ``NULL`` arguments skipped
- ``coalesce(a, ...)``: the first argument that is not ``NULL``
- ``lower(a)``, ``upper(a)``, ``trim(a)`` (spaces at both ends), ``length(a)`` (characters)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .syntax import Binary, Call, Column, InList, IsNull, Literal, Node, Unary
from .values import arithmetic, compare, negate, text_of

Row = Mapping[str, Any]
Compiled = Callable[[Row], Any]


def _text_function(transform: Callable[[str], Any]) -> Callable[[list[Any]], Any]:
    def apply(args: list[Any]) -> Any:
        return None if args[0] is None else transform(text_of(args[0]))
    return apply


def _concat(args: list[Any]) -> str | None:
    if any(arg is None for arg in args):
        return None
    return "".join(text_of(arg) for arg in args)


def _concat_ws(args: list[Any]) -> str | None:
    if args[0] is None:
        return None
    return text_of(args[0]).join(text_of(arg) for arg in args[1:] if arg is not None)


def _coalesce(args: list[Any]) -> Any:
    return next((arg for arg in args if arg is not None), None)


FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "concat": _concat,
    "concat_ws": _concat_ws,
    "coalesce": _coalesce,
    "lower": _text_function(str.lower),
    "upper": _text_function(str.upper),
    "trim": _text_function(lambda text: text.strip(" ")),
    "length": _text_function(len),
}


def _truth(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _and(left: Any, right: Any) -> bool | None:
    a, b = _truth(left), _truth(right)
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(left: Any, right: Any) -> bool | None:
    a, b = _truth(left), _truth(right)
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _in(value: Any, items: list[Any]) -> bool | None:
    if value is None:
        return None
    found = [compare("=", value, item) for item in items]
    if True in found:
        return True
    return None if None in found else False


def _compile_binary(node: Binary) -> Compiled:
    left, right, op = compile_expression(node.left), compile_expression(node.right), node.op
    if op == "and":
        return lambda row: _and(left(row), right(row))
    if op == "or":
        return lambda row: _or(left(row), right(row))
    if op in ("+", "-", "*", "/"):
        return lambda row: arithmetic(op, left(row), right(row))
    return lambda row: compare(op, left(row), right(row))


def compile_expression(node: Node) -> Compiled:
    """A function of a row that evaluates ``node`` (a missing column reads as ``NULL``)."""
    match node:
        case Literal(value):
            return lambda row: value
        case Column(name):
            return lambda row: row.get(name)
        case Call(function, args):
            apply, compiled = FUNCTIONS[function], [compile_expression(arg) for arg in args]
            return lambda row: apply([arg(row) for arg in compiled])
        case Unary("-", operand):
            inner = compile_expression(operand)
            return lambda row: negate(inner(row))
        case Unary(_, operand):
            inner = compile_expression(operand)

            def negation(row: Row) -> bool | None:
                truth = _truth(inner(row))
                return None if truth is None else not truth
            return negation
        case Binary():
            return _compile_binary(node)
        case IsNull(operand, negated):
            inner = compile_expression(operand)
            return lambda row: (inner(row) is None) != negated
        case InList(operand, items, negated):
            inner, options = compile_expression(operand), [compile_expression(i) for i in items]

            def membership(row: Row) -> bool | None:
                found = _in(inner(row), [option(row) for option in options])
                return found if found is None or not negated else not found
            return membership
    raise TypeError(f"not an expression node: {node!r}")
