"""The view expression language: parsing, errors, and evaluation semantics."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from derived import ExpressionError, columns_of, compile_expression, parse_expression
from derived.values import json_value

ROW: dict[str, Any] = {"first": "Ada", "last": "Lovelace", "n": 7, "price": "12.50",
                       "ratio": 0.5, "flag": True, "none": None, "odd name": "x",
                       "tags": ["a", "b"]}


def evaluate(source: str, row: dict[str, Any] | None = None) -> Any:
    return json_value(compile_expression(parse_expression(source))(ROW if row is None else row))


@pytest.mark.parametrize(("source", "expected"), [
    ("concat(first, ' ', last)", "Ada Lovelace"),
    ("concat(first, none)", None),
    ("concat_ws('-', first, none, last)", "Ada-Lovelace"),
    ("concat('n=', n, ', flag=', flag, ', ', tags)", 'n=7, flag=true, ["a","b"]'),
    ("lower(first)", "ada"),
    ("UPPER(last)", "LOVELACE"),
    ("trim('  x  ')", "x"),
    ("length(last)", 8),
    ("coalesce(none, last, first)", "Lovelace"),
    ("coalesce(none)", None),
    ("`odd name`", "x"),
    ("'it''s'", "it's"),
    ("missing", None),
])
def test_functions_and_literals(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("n + 1", 8),
    ("n * 3 - 1", 20),
    ("-n", -7),
    ("price * 2", "25.00"),              # numeric text is an exact decimal
    ("price + 0.01", "12.51"),
    ("n / 2", "3.5"),                    # division is exact, not floor
    ("n / 0", None),                     # division by zero is NULL
    ("ratio * 2", 1.0),                  # floats stay floats
    ("first + 1", None),                 # text that is not a number
    ("flag + 1", None),                  # booleans are not numbers
    ("none + 1", None),
    ("1e2 + 1", 101.0),
    ("(n + 1) * 2", 16),
    ("12345678901234567890123456789 + 1", 12345678901234567890123456790),
    ("'99999999999999999999.99' + 0.01", "100000000000000000000.00"),
])
def test_arithmetic(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("n = 7", True),
    ("n == 7 AND n <> 8 AND n != 9", True),
    ("price > 10", True),                # numeric text against a number compares as number
    ("price < '2'", True),               # text against text: code point order
    ("first = 'Ada' OR none = 1", True),
    ("none = 1 OR first = 'x'", None),
    ("none = 1 AND first = 'x'", False),
    ("NOT (n > 10)", True),
    ("NOT none", None),
    ("none IS NULL AND first IS NOT NULL", True),
    ("n IN (1, 7, 9)", True),
    ("n NOT IN (1, 2)", True),
    ("n IN (1, none)", None),
    ("n NOT IN (7, none)", False),
    ("flag = TRUE", True),
    ("flag = 1", None),                  # a boolean and a number do not compare
    ("first > 1", None),
    ("'NaN' > 1", None),
])
def test_logic_and_comparisons(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


def test_columns_of_lists_every_column_read() -> None:
    tree = parse_expression("concat(a, lower(b)) = c OR d IS NULL AND e IN (f, 1) AND -g > 0")
    assert columns_of(tree) == {"a", "b", "c", "d", "e", "f", "g"}


def test_decimal_literals_are_exact() -> None:
    assert evaluate("0.1 + 0.2") == "0.3"
    assert isinstance(compile_expression(parse_expression("0.1"))({}), Decimal)


@pytest.mark.parametrize(("source", "words"), [
    ("", "expected an expression"),
    ("concat(a,", "at character 10"),
    ("a +", "expected a value, a column or '('"),
    ("a b", "expected an operator or the end at character 3, found 'b'"),
    ("eval('1')", "unknown function 'eval'"),
    ("__import__('os')", "unknown function '__import__'"),
    ("lower(a, b)", "lower() takes 1 argument(s), got 2"),
    ("concat()", "concat() takes at least 1 argument(s), got 0"),
    ("a IS 1", "NULL after IS"),
    ("a NOT b", "IN after NOT"),
    ("a ; b", "unexpected ';' at character 3"),
    ("'open", "unexpected \"'\" at character 1"),
    ("a.b", "unexpected '.'"),
])
def test_errors_name_the_position(source: str, words: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_expression(source)
    assert words in str(caught.value)
