"""``on: foreign_key``: a joined level's columns read from the database's foreign keys.

A lookup joins its parent's table to its own through the one foreign key of the parent's
table referencing it (``orders.customer_id → customers.id`` gives ``{customer_id: id}``);
a nested list through the one foreign key of its own table referencing the parent's
(``order_items.order_id → orders.id`` gives ``{id: order_id}``). No such key, or several,
is a configuration error naming the level and the keys found: declare ``on`` then.

``resolve_foreign_keys`` reads them once, when a command that builds joined records
starts (``cdc connect``/``cdc run``, ``cdc reconcile``, ``cdc replay``), and returns the
pipeline with every ``foreign_key`` replaced by its columns.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cdc.capture.source import session
from cdc.config import PipelineConfig
from cdc.config.commands import exit_with_problems
from cdc.errors import ConfigError, ConfigProblem
from derived import JoinedTable, JoinedView, JoinLevel

__all__ = ["ForeignKey", "foreign_keys_between", "resolve_foreign_keys",
           "resolve_foreign_keys_or_exit"]

ForeignKey = tuple[str, tuple[str, ...], tuple[str, ...]]  # name, columns, referenced columns

_FOREIGN_KEYS = """
SELECT c.conname::text,
       array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
             ORDER BY k.n),
       array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum
             ORDER BY k.n)
FROM pg_constraint c
JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace rn ON rn.oid = r.relnamespace
JOIN pg_class f ON f.oid = c.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace
WHERE c.contype = 'f' AND rn.nspname = %s AND r.relname = %s
  AND fn.nspname = %s AND f.relname = %s
ORDER BY c.conname
"""


def foreign_keys_between(conn: psycopg.Connection[Any], referencing: tuple[str, str],
                         referenced: tuple[str, str]) -> list[ForeignKey]:
    """The foreign keys of table ``referencing`` that reference table ``referenced``."""
    return [(name, tuple(columns), tuple(target)) for name, columns, target in conn.execute(
        _FOREIGN_KEYS, (*referencing, *referenced)).fetchall()]


def resolve_foreign_keys(config: PipelineConfig) -> PipelineConfig:
    """``config`` with every ``on: foreign_key`` of its connectors' joined views replaced
    by the columns of the foreign key it stands for (``config`` itself when there is none);
    ``ConfigError`` naming each level with no such key or several."""
    wanted = [number for number, connector in enumerate(config.connectors)
              if any(_asks(view) for view in getattr(connector.config, "joins", ()))]
    if not wanted:
        return config
    problems: list[ConfigProblem] = []
    connectors = list(config.connectors)
    try:
        with session.connect(config.source.conninfo()) as conn:
            for number in wanted:
                connector = connectors[number]
                where = f"connectors[{number}].config.joins"
                views: tuple[JoinedView, ...] = getattr(connector.config, "joins", ())
                joins = tuple(_resolved(conn, view, f"{where}[{index}]", problems)
                              for index, view in enumerate(views))
                sink = connector.config.model_copy(update={"joins": joins})
                connectors[number] = connector.model_copy(update={"config": sink})
    except psycopg.Error as exc:
        raise ConfigError([ConfigProblem(
            "source.dsn", "on: foreign_key needs the source database to read its foreign "
            f"keys, and it could not be read ({type(exc).__name__}: {_first_line(exc)}); "
            "start the database, or declare the join columns with on: {column: column}")]
            ) from None
    if problems:
        raise ConfigError(problems)
    return config.model_copy(update={"connectors": tuple(connectors)})


def resolve_foreign_keys_or_exit(config: PipelineConfig) -> PipelineConfig:
    """``resolve_foreign_keys``, or one line per problem and exit status 2 (a command's
    start)."""
    try:
        return resolve_foreign_keys(config)
    except ConfigError as error:
        exit_with_problems(error)


def _asks(level: JoinLevel) -> bool:
    return any(joined.on == "foreign_key" or _asks(joined) for joined in level.joined())


def _resolved(conn: psycopg.Connection[Any], level: JoinedView | JoinedTable, where: str,
              problems: list[ConfigProblem]) -> Any:
    """``level`` with the ``on`` of every level below it resolved."""
    lookups = tuple(_joined(conn, level, joined, f"{where}.lookups[{number}]", False, problems)
                    for number, joined in enumerate(level.lookups))
    nested = tuple(_joined(conn, level, joined, f"{where}.nested[{number}]", True, problems)
                   for number, joined in enumerate(level.nested))
    return level.model_copy(update={"lookups": lookups, "nested": nested})


def _joined(conn: psycopg.Connection[Any], parent: JoinLevel, joined: JoinedTable,
            where: str, nested: bool, problems: list[ConfigProblem]) -> JoinedTable:
    resolved: JoinedTable = _resolved(conn, joined, where, problems)
    if joined.on != "foreign_key":
        return resolved
    referencing, referenced = ((joined, parent) if nested else (parent, joined))
    found = foreign_keys_between(conn, referencing.table, referenced.table)
    if len(found) != 1:
        what = ("no foreign key" if not found else
                f"{len(found)} foreign keys ({', '.join(name for name, _, _ in found)})")
        problems.append(ConfigProblem(f"{where}.on", (
            f"foreign_key: {referencing.source} has {what} referencing {referenced.source}; "
            "declare the columns, like on: {column: column}")))
        return resolved
    _, columns, target = found[0]
    on = dict(zip(target, columns, strict=True)) if nested else dict(
        zip(columns, target, strict=True))
    return resolved.model_copy(update={"on": on})


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
