"""Pydantic's validation errors, reworded as ``ConfigProblem``s a person can act on.

Each message names what was found (never a secret) and what is expected; unknown keys
list the keys the section accepts, with a "did you mean" when one is close.
"""

from __future__ import annotations

import difflib

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from cdc.config.base import SECRET_FILE_SUFFIX, is_secret_annotation
from cdc.config.document import ConfigDocument
from cdc.config.yaml_source import YamlPath

_EXPECTED: dict[str, str] = {
    "string_type": "text",
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list", "set_type": "a list",
    "path_type": "a file path",
}
_COMPARISONS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
                "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}
_MAX_SHOWN = 60


def show_value(value: object) -> str:
    """A short description of a YAML value: ``'text'``, ``3``, ``null``, ``a mapping``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        shown = repr(value)
        return shown if len(shown) <= _MAX_SHOWN else shown[: _MAX_SHOWN - 4] + "…'"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list | tuple):
        return "a list" if value else "an empty list"
    return f"a {type(value).__name__}"


def _accepted_keys(document: ConfigDocument, parent: YamlPath) -> list[str]:
    model = document.models.get(parent)
    if model is None:
        return []
    keys: list[str] = []
    for name, field in model.model_fields.items():
        keys.append(name)
        if is_secret_annotation(field.annotation):
            keys.append(name + SECRET_FILE_SUFFIX)
    return keys


def _unknown_key(document: ConfigDocument, loc: YamlPath) -> str:
    key = str(document.file_path(loc)[-1])
    accepted = _accepted_keys(document, loc[:-1])
    if not accepted:
        return "unknown key"
    message = f"unknown key; expected one of: {', '.join(accepted)}"
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
    return message + (f"; did you mean {close[0]!r}?" if close else "")


def _missing(document: ConfigDocument, loc: YamlPath) -> str:
    model = document.models.get(loc[:-1])
    field = model.model_fields.get(str(loc[-1])) if model is not None else None
    if field is not None and field.description:
        return f"missing required field: {field.description}"
    return "missing required field"


def _expected(error: ErrorDetails) -> str | None:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}"
    if kind in ("literal_error", "enum"):
        return f"expected {ctx.get('expected')}"
    if kind in _COMPARISONS:
        name, sign = _COMPARISONS[kind]
        return f"expected a value {sign} {ctx.get(name)}"
    if kind == "too_short":
        count = ctx.get("min_length")
        return f"expected at least {count} item{'s' if count != 1 else ''}"
    if kind == "too_long":
        return f"expected at most {ctx.get('max_length')} items"
    if kind == "string_too_short":
        return "expected a non-empty string"
    if kind == "string_too_long":
        return f"expected at most {ctx.get('max_length')} characters"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"]))
    return None


def describe_error(error: ErrorDetails, document: ConfigDocument) -> tuple[YamlPath, str]:
    """The location and wording of one pydantic error."""
    loc: YamlPath = tuple(error["loc"])
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:
        loc = loc[:-1]
    kind = error["type"]
    if kind == "missing":
        return loc, _missing(document, loc)
    if kind == "extra_forbidden":
        return loc, _unknown_key(document, loc)
    expected = _expected(error)
    if expected is None:
        return loc, error["msg"]
    if is_key:
        return loc, f"bad key {show_value(loc[-1])}; {expected}"
    shown = document.redactor.scrub(show_value(error.get("input")))
    if document.is_sensitive(loc) or document.redactor.leaks(shown):
        return loc, expected
    return loc, f"{expected}, got {shown}"


def validation_problems(exc: ValidationError, document: ConfigDocument
                        ) -> list[tuple[YamlPath, str]]:
    """``(location, message)`` per error in ``exc``, worded for the file the user wrote."""
    errors = exc.errors()
    failed = {tuple(error["loc"]) for error in errors}
    return [describe_error(error, document) for error in errors
            if not (error["type"] == "too_short" and _has_failed_items(error, failed))]


def _has_failed_items(error: ErrorDetails, failed: set[tuple[str | int, ...]]) -> bool:
    """True if items of a list failed: its length check then only echoes those failures."""
    loc = tuple(error["loc"])
    return any(len(other) > len(loc) and other[: len(loc)] == loc for other in failed)
