"""The topic of a table: ``(schema, table)`` → a name valid on every log backend.

The rule (README, "Events"):

- ``<prefix>.<schema>.<table>``, each name kept as it is when it holds only letters,
  digits, ``_`` and ``-`` (so every plain name keeps the topic it always had);
- any other character — a space, ``.``, an accent, a quote — becomes ``_x<hex>_``, its
  Unicode code point in lowercase hex: ``"Sales Dept"."Order Items"`` →
  ``<prefix>.Sales_x20_Dept.Order_x20_Items``; a ``.`` inside a name becomes ``_x2e_``,
  so the two separators stay the only dots;
- a topic longer than 249 characters (Kafka's limit) keeps its first 240 and ends with
  ``_`` and 8 hex digits of the SHA-256 of the untruncated name;
- ``log.topic_names`` overrides the rule for one table (key: ``schema.table`` written
  plainly, or quoted like ``"Sales Dept"."Order Items"``).

Case is kept: ``Orders`` and ``orders`` are two topics. Two tables whose topics would be
the same (e.g. ``a_x20_b`` and ``a b``, or a name cut to its hash), or the same once
``.`` and ``_`` are one character (Kafka refuses ``p.a_b.c`` beside ``p.a.b_c``), are
found by ``check_collisions`` before anything is written, naming both tables and the key
that separates them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cdc.errors import ConfigError, ConfigProblem

MAX_TOPIC_LENGTH = 249
_KEPT = re.compile(r"[A-Za-z0-9_-]*")
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_HASH_DIGITS = 8


def escape_name(name: str) -> str:
    """One PostgreSQL name as a topic part: characters outside ``[A-Za-z0-9_-]`` become
    ``_x<hex code point>_``."""
    if _KEPT.fullmatch(name):
        return name
    return _OTHER.sub(lambda m: f"_x{ord(m.group(0)):x}_", name)


def plain_topic(prefix: str, schema: str, table: str) -> str:
    """The topic a table would have if every name were plain."""
    return f"{prefix}.{schema}.{table}"


def quoted_table(schema: str, table: str) -> str:
    """``"schema"."table"`` with SQL quoting (a ``"`` doubled)."""
    return '"{}"."{}"'.format(schema.replace('"', '""'), table.replace('"', '""'))


def table_topic(prefix: str, schema: str, table: str) -> str:
    """The topic of ``schema.table`` by the rule (no override)."""
    topic = f"{prefix}.{escape_name(schema)}.{escape_name(table)}"
    if len(topic) <= MAX_TOPIC_LENGTH:
        return topic
    digest = hashlib.sha256(topic.encode()).hexdigest()[:_HASH_DIGITS]
    return f"{topic[:MAX_TOPIC_LENGTH - _HASH_DIGITS - 1]}_{digest}"


@dataclass(frozen=True)
class TopicNamer:
    """The topic of each table: the rule, or the table's ``log.topic_names`` entry."""

    prefix: str
    overrides: Mapping[str, str] = field(default_factory=dict)

    def topic_for(self, schema: str, table: str) -> str:
        """The topic that holds the changes of ``schema.table``."""
        override = self.overrides.get(f"{schema}.{table}")
        if override is None:
            override = self.overrides.get(quoted_table(schema, table))
        return override if override is not None else table_topic(self.prefix, schema, table)

    def renamed(self, tables: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """``(schema, table, topic)`` of the tables whose topic is not the plain name."""
        found = []
        for schema, table in tables:
            topic = self.topic_for(schema, table)
            if topic != plain_topic(self.prefix, schema, table):
                found.append((schema, table, topic))
        return found

    def check_collisions(self, tables: Iterable[tuple[str, str]]) -> None:
        """Raise ``ConfigError`` when two of ``tables`` would share a topic."""
        claims = TopicClaims(self)
        for schema, table in tables:
            claims.claim(schema, table)


def collision_key(topic: str) -> str:
    """What two topics must not share: Kafka refuses a topic equal to an existing one
    once ``.`` and ``_`` count as the same character (``p.a_b.c`` and ``p.a.b_c``)."""
    return topic.replace(".", "_")


class TopicClaims:
    """The table each topic is of: a second table on one topic (or on two topics Kafka
    counts as the same, see ``collision_key``) is a ``ConfigError`` naming both."""

    def __init__(self, namer: TopicNamer) -> None:
        self.namer = namer
        self._owners: dict[str, tuple[str, str, str]] = {}  # key → schema, table, topic

    def claim(self, schema: str, table: str) -> str:
        """The topic of ``schema.table``, now known to be that table's alone."""
        topic = self.namer.topic_for(schema, table)
        owner = self._owners.setdefault(collision_key(topic), (schema, table, topic))
        if owner[:2] != (schema, table):
            raise ConfigError([ConfigProblem("log.topic_names", collision_message(
                owner[2], (owner[0], owner[1]), topic, (schema, table)))])
        return topic

    def owns(self, schema: str, table: str) -> bool:
        """True unless another table holds ``schema.table``'s topic."""
        owner = self._owners.get(collision_key(self.namer.topic_for(schema, table)))
        return owner is None or owner[:2] == (schema, table)


def collision_message(first_topic: str, first: tuple[str, str], second_topic: str,
                      second: tuple[str, str]) -> str:
    """Why two tables cannot have these topics, and the config key that separates them."""
    a, b = quoted_table(*first), quoted_table(*second)
    where = (f"would both be written to topic {first_topic!r}" if first_topic == second_topic
             else f"would be written to topics {first_topic!r} and {second_topic!r}, which "
                  "Kafka counts as the same ('.' and '_' collide in topic names)")
    return (f"tables {a} and {b} {where}; give one of them its own topic in "
            f"log.topic_names, e.g. log.topic_names: "
            f"{{'{second[0]}.{second[1]}': '<a topic name of letters, digits, . _ ->'}}")
