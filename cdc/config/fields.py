"""Field types shared by the pipeline models and the sinks' config models.

Durations, sizes, identifiers, URLs, DSNs and name templates. Each type parses what a
person writes in YAML (``30s``, ``10GiB``, ``forever``) into a typed value, explains what
it expected when it cannot, and writes itself back in the same notation (so JSON Schema
defaults read like the YAML).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from string import Formatter
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, PlainSerializer, WithJsonSchema

from cdc.config import units
from cdc.config.conninfo import parse_dsn


def _positive_duration(value: object) -> timedelta:
    if isinstance(value, timedelta):
        duration = value
    elif isinstance(value, str):
        duration = units.parse_duration(value)
    else:
        raise ValueError(f"expected a duration like {units.DURATION_EXAMPLES}")
    if duration <= timedelta(0):
        raise ValueError("expected a duration greater than zero")
    return duration


def _retention_time(value: object) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    expected = f"expected 'forever' or a duration like {units.DURATION_EXAMPLES}"
    if not isinstance(value, str):
        raise ValueError(expected)
    try:
        duration = units.parse_retention_time(value)
        return None if duration is None else _positive_duration(duration)
    except ValueError:
        raise ValueError(expected) from None


def _size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a size like {units.SIZE_EXAMPLES}")
    size = value if isinstance(value, int) else units.parse_size(value)
    if size <= 0:
        raise ValueError("expected a size greater than zero")
    return size


def _retention_size(value: object) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == units.FOREVER):
        return None
    try:
        return _size(value)
    except ValueError:
        raise ValueError(f"expected 'forever' or a size like {units.SIZE_EXAMPLES}") from None


_DURATION_SCHEMA = {"type": "string", "pattern": r"^(\s*\d+(\.\d+)?\s*(ms|s|m|h|d|w))+\s*$",
                    "description": f"a duration like {units.DURATION_EXAMPLES}"}
_SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([KMGTkmgt]i?[Bb]|[Bb])\s*$"
_SIZE_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1},
                          {"type": "string", "pattern": _SIZE_PATTERN}],
                "description": f"a size like {units.SIZE_EXAMPLES}"}


def _or_forever(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [{"const": units.FOREVER}, schema],
            "description": f"'forever' or {schema['description']}"}


def _serialize_optional(format_value: Any) -> Any:
    def serialize(value: Any) -> Any:
        return units.FOREVER if value is None else format_value(value)
    return serialize


Duration = Annotated[timedelta, BeforeValidator(_positive_duration),
                     PlainSerializer(units.format_duration, return_type=str, when_used="json"),
                     WithJsonSchema(_DURATION_SCHEMA)]
"""A positive duration written with units: ``500ms``, ``30s``, ``5m``, ``12h``, ``7d``."""

DataSize = Annotated[int, BeforeValidator(_size),
                     PlainSerializer(units.format_size, return_type=str, when_used="json"),
                     WithJsonSchema(_SIZE_SCHEMA)]
"""A positive number of bytes, written ``500MB``, ``10GiB`` or as a plain integer."""

RetentionTime = Annotated[timedelta | None, BeforeValidator(_retention_time),
                          PlainSerializer(_serialize_optional(units.format_duration),
                                          return_type=str, when_used="json"),
                          WithJsonSchema(_or_forever(_DURATION_SCHEMA))]
"""A retention duration, or ``forever`` (``None``)."""

RetentionSize = Annotated[int | None, BeforeValidator(_retention_size),
                          PlainSerializer(_serialize_optional(units.format_size),
                                          return_type=str, when_used="json"),
                          WithJsonSchema(_or_forever(_SIZE_SCHEMA))]
"""A retention size in bytes, or ``forever`` (``None``)."""


def _matching(pattern: str, expected: str) -> Any:
    compiled = re.compile(pattern)

    def validate(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"expected {expected}")
        return value

    return AfterValidator(validate)


SlotName = Annotated[str, _matching(r"[a-z0-9_]{1,63}",
                                    "a slot name of 1-63 lowercase letters, digits or '_'"),
                     WithJsonSchema({"type": "string", "pattern": "^[a-z0-9_]{1,63}$"})]
"""A replication slot name: what PostgreSQL accepts (lowercase letters, digits, ``_``, ≤63)."""

PgIdentifier = Annotated[str, _matching(r"[a-z_][a-z0-9_$]{0,62}",
                                        "a lowercase identifier: a letter or '_', then letters, "
                                        "digits, '_' or '$', at most 63 characters"),
                         WithJsonSchema({"type": "string", "pattern": "^[a-z_][a-z0-9_$]{0,62}$"})]
"""An unquoted, lowercase PostgreSQL identifier (for example a publication name)."""

TableName = Annotated[str, _matching(r"[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*",
                                     "'schema.table', like 'public.orders'"),
                      WithJsonSchema({"type": "string",
                                      "pattern": r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$"})]
"""A table named with its schema: ``public.orders``."""

TopicName = Annotated[str, _matching(r"[A-Za-z0-9._-]{1,249}",
                                     "a topic name of letters, digits, '.', '_' or '-'"),
                      WithJsonSchema({"type": "string", "pattern": "^[A-Za-z0-9._-]{1,249}$"})]
"""A log topic name (the characters Kafka allows too)."""


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"expected a valid regular expression ({exc})") from None
    return value


RegexPattern = Annotated[str, AfterValidator(_regex)]
"""A Python regular expression, checked to compile."""


def _dsn(value: str) -> str:
    parse_dsn(value)
    return value


PostgresDsn = Annotated[str, AfterValidator(_dsn),
                        WithJsonSchema({"type": "string", "description": "a postgresql:// URL "
                                        "or a key=value connection string"})]
"""A libpq connection string (URL or ``key=value``), checked with libpq's parser."""


def url_validator(schemes: Sequence[str]) -> AfterValidator:
    """A validator for a URL with one of ``schemes`` and a host (userinfo never echoed)."""
    shown = "a URL starting with " + " or ".join(f"{scheme}://" for scheme in schemes)

    def validate(value: str) -> str:
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise ValueError(f"expected {shown}; this one cannot be parsed") from None
        if parts.scheme not in schemes:
            raise ValueError(f"expected {shown}")
        if not parts.hostname and parts.scheme != "unix":
            raise ValueError(f"expected {shown} and a host name")
        return value

    return AfterValidator(validate)


HttpUrl = Annotated[str, url_validator(("http", "https")),
                    WithJsonSchema({"type": "string", "format": "uri", "pattern": "^https?://"})]
"""An ``http://`` or ``https://`` URL, kept as written."""


def _scalar_text(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


ScalarText = Annotated[str, BeforeValidator(_scalar_text)]
"""Text; YAML numbers and booleans are accepted and written as text (``4``, ``true``)."""



def template_validator(fields: Sequence[str], example: str) -> AfterValidator:
    """A validator for a ``str.format`` template whose fields are among ``fields``.

    ``{key.id}`` counts as the field ``key``; the template is kept as written.
    """
    allowed = ", ".join("{" + name + "}" for name in fields)

    def validate(template: str) -> str:
        try:
            parsed = list(Formatter().parse(template))
        except ValueError as exc:
            raise ValueError(f"expected a template like {example!r} ({exc})") from None
        for _, field, _, _ in parsed:
            if field is None:
                continue
            root = re.split(r"[.\[]", field, maxsplit=1)[0]
            if root not in fields:
                raise ValueError(f"unknown placeholder {{{field}}}; expected {allowed}")
        return template

    return AfterValidator(validate)


def literal_parts(template: str) -> str:
    """The text of a template outside its ``{placeholders}``."""
    return "".join(literal for literal, _, _, _ in Formatter().parse(template))
