"""The expression language's syntax: tokens, the tree, and a recursive-descent parser.

A subset of Spark SQL expressions (so a definition reads the same in a Spark job)::

    expr     := or
    or       := and ("OR" and)*
    and      := not ("AND" not)*
    not      := "NOT" not | compare
    compare  := sum [(= | == | != | <> | < | <= | > | >=) sum
                    | "IS" ["NOT"] "NULL" | ["NOT"] "IN" "(" expr ("," expr)* ")"]
    sum      := product (("+" | "-") product)*
    product  := unary (("*" | "/") unary)*
    unary    := "-" unary | primary
    primary  := number | 'text' | TRUE | FALSE | NULL | column | `column`
              | name "(" [expr ("," expr)*] ")" | "(" expr ")"

Keywords and function names are case-insensitive; column names are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

FUNCTION_ARITY: dict[str, tuple[int, int | None]] = {
    "concat": (1, None), "concat_ws": (2, None), "coalesce": (1, None),
    "lower": (1, 1), "upper": (1, 1), "trim": (1, 1), "length": (1, 1),
}
_KEYWORDS = frozenset({"and", "or", "not", "is", "null", "in", "true", "false"})
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<text>'(?:[^']|'')*')
  | (?P<quoted>`(?:[^`]|``)+`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|[-+*/(),=<>])
""", re.VERBOSE)


class ExpressionError(ValueError):
    """An expression that does not parse; the message says where and what was expected."""


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Column:
    name: str


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" or "not"
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # and or = != < <= > >= + - * /
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    negated: bool


@dataclass(frozen=True, slots=True)
class InList:
    operand: Node
    items: tuple[Node, ...]
    negated: bool


Node = Literal | Column | Call | Unary | Binary | IsNull | InList


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number text quoted name keyword op end
    text: str
    at: int


def _tokens(source: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            raise ExpressionError(f"unexpected {source[at]!r} at character {at + 1}")
        kind = match.lastgroup or ""
        if kind == "name" and match.group().lower() in _KEYWORDS:
            found.append(_Token("keyword", match.group().lower(), at))
        elif kind != "space":
            found.append(_Token(kind, match.group(), at))
        at = match.end()
    found.append(_Token("end", "", len(source)))
    return found


def _number(text: str) -> int | Decimal | float:
    if "e" in text.lower():
        return float(text)
    return Decimal(text) if "." in text else int(text)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokens(source)
        self.at = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def take(self, kind: str, *texts: str) -> _Token | None:
        token = self.token
        if token.kind == kind and (not texts or token.text in texts):
            self.at += 1
            return token
        return None

    def expect(self, kind: str, text: str, what: str) -> None:
        if self.take(kind, text) is None:
            raise self.error(what)

    def error(self, expected: str) -> ExpressionError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return ExpressionError(f"expected {expected} at character {token.at + 1}, found {found}")

    def parse(self) -> Node:
        node = self.disjunction()
        if self.token.kind != "end":
            raise self.error("an operator or the end")
        return node

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.take("keyword", "or"):
            node = Binary("or", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.take("keyword", "and"):
            node = Binary("and", node, self.negation())
        return node

    def negation(self) -> Node:
        if self.take("keyword", "not"):
            return Unary("not", self.negation())
        return self.comparison()

    def comparison(self) -> Node:
        node = self.sum()
        op = self.take("op", "=", "==", "!=", "<>", "<", "<=", ">", ">=")
        if op is not None:
            name = {"==": "=", "<>": "!="}.get(op.text, op.text)
            return Binary(name, node, self.sum())
        if self.take("keyword", "is"):
            negated = self.take("keyword", "not") is not None
            self.expect("keyword", "null", "NULL after IS")
            return IsNull(node, negated)
        negated = self.take("keyword", "not") is not None
        if negated or (self.token.kind == "keyword" and self.token.text == "in"):
            self.expect("keyword", "in", "IN after NOT")
            self.expect("op", "(", "'(' after IN")
            items = [self.disjunction()]
            while self.take("op", ","):
                items.append(self.disjunction())
            self.expect("op", ")", "')' closing the IN list")
            return InList(node, tuple(items), negated)
        return node

    def sum(self) -> Node:
        node = self.product()
        while (op := self.take("op", "+", "-")) is not None:
            node = Binary(op.text, node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while (op := self.take("op", "*", "/")) is not None:
            node = Binary(op.text, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.take("op", "-"):
            return Unary("-", self.unary())
        return self.primary()

    def primary(self) -> Node:
        token = self.token
        if self.take("number"):
            return Literal(_number(token.text))
        if self.take("text"):
            return Literal(token.text[1:-1].replace("''", "'"))
        if self.take("quoted"):
            return Column(token.text[1:-1].replace("``", "`"))
        if self.take("keyword", "true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[token.text])
        if self.take("op", "("):
            node = self.disjunction()
            self.expect("op", ")", "')'")
            return node
        if self.take("name"):
            if self.take("op", "("):
                return self.call(token)
            return Column(token.text)
        raise self.error("a value, a column or '('")

    def call(self, name: _Token) -> Node:
        function = name.text.lower()
        if function not in FUNCTION_ARITY:
            known = ", ".join(sorted(FUNCTION_ARITY))
            raise ExpressionError(f"unknown function {name.text!r} at character {name.at + 1}; "
                                  f"known: {known}")
        args: list[Node] = []
        if not self.take("op", ")"):
            args.append(self.disjunction())
            while self.take("op", ","):
                args.append(self.disjunction())
            self.expect("op", ")", f"',' or ')' in {function}(...)")
        least, most = FUNCTION_ARITY[function]
        if len(args) < least or (most is not None and len(args) > most):
            wanted = str(least) if least == most else f"at least {least}"
            raise ExpressionError(f"{function}() takes {wanted} argument(s), got {len(args)}")
        return Call(function, tuple(args))


def parse_expression(source: str) -> Node:
    """The tree of ``source``; raises ``ExpressionError`` naming the position of a mistake."""
    if not source.strip():
        raise ExpressionError("expected an expression, found nothing")
    return _Parser(source).parse()


def columns_of(node: Node) -> frozenset[str]:
    """Every column ``node`` reads."""
    match node:
        case Column(name):
            return frozenset({name})
        case Literal():
            return frozenset()
        case Call(_, args):
            return frozenset().union(*(columns_of(arg) for arg in args))
        case Unary(_, operand) | IsNull(operand, _):
            return columns_of(operand)
        case Binary(_, left, right):
            return columns_of(left) | columns_of(right)
        case InList(operand, items, _):
            return columns_of(operand).union(*(columns_of(item) for item in items))
    raise TypeError(f"not an expression node: {node!r}")
