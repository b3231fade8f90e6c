"""Which tables to check against which connectors: the publication's tables whose topic
a chosen connector consumes (``--connector``, ``--table`` narrow it down), and which
joined views (``joins:`` of a chosen connector; ``--table`` keeps those reading it). A
table a connector reads only for its joined views (no view of its own) is checked
through those views, not as a table of that connector."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cdc.capture.schema.topics import published_tables
from cdc.capture.source import session
from cdc.capture.source.slot import split_table
from cdc.config import ConnectorConfig, PipelineConfig
from derived import JoinedView

SUPPORTED = ("opensearch", "redis")


class PlanError(ValueError):
    """The options name something the pipeline does not have (a usage error)."""


@dataclass(frozen=True, slots=True)
class TablePlan:
    """One table, its topic, and the connectors that feed a sink from it."""

    schema: str
    name: str
    topic: str
    connectors: tuple[ConnectorConfig, ...]

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class JoinPlan:
    """One joined view of one connector."""

    connector: ConnectorConfig
    join: JoinedView

    @property
    def table(self) -> str:
        """The root table, ``schema.table``."""
        return self.join.source


def joins_of(connector: ConnectorConfig) -> tuple[JoinedView, ...]:
    """The connector's joined views (none for a sink without ``joins``)."""
    joins: tuple[JoinedView, ...] = getattr(connector.config, "joins", ())
    return joins


def join_only(connector: ConnectorConfig, schema: str, table: str) -> bool:
    """True when ``connector`` reads ``schema.table`` only for its joined views."""
    if not any((schema, table) in join.tables() for join in joins_of(connector)):
        return False
    return not any(view.table == (schema, table)
                   for view in getattr(connector.config, "views", ()))


def checkable(connector: ConnectorConfig) -> str | None:
    """Why ``connector`` cannot be reconciled, or ``None`` when it can."""
    if connector.type not in SUPPORTED:
        return f"a {connector.type} sink keeps no records to compare"
    if getattr(connector.config, "mode", "upsert") != "upsert":
        return "mode: invalidate keeps no values to compare"
    return None


def consumes(connector: ConnectorConfig, topic: str) -> bool:
    """True when ``connector`` reads ``topic``."""
    if connector.topics is not None:
        return topic in connector.topics
    return connector.topic_pattern is not None and re.fullmatch(
        connector.topic_pattern, topic) is not None


def chosen_connectors(config: PipelineConfig, names: Sequence[str]) -> list[ConnectorConfig]:
    """The connectors ``names`` choose (none: every checkable one); ``PlanError`` for a
    name the pipeline does not have or a connector that cannot be reconciled."""
    known = {connector.name: connector for connector in config.connectors}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise PlanError(f"no connector named {', '.join(map(repr, unknown))}; configured: "
                        f"{', '.join(known) or '(none)'}")
    if names:
        chosen = [known[name] for name in dict.fromkeys(names)]
        for connector in chosen:
            reason = checkable(connector)
            if reason is not None:
                raise PlanError(f"--connector {connector.name}: cannot reconcile it ({reason})")
    else:
        chosen = [c for c in config.connectors if checkable(c) is None]
    if not chosen:
        raise PlanError("the pipeline file has no opensearch or redis connector (mode: "
                        "upsert) to reconcile")
    return chosen


def plan_tables(config: PipelineConfig, names: Sequence[str],
                tables: Sequence[str]) -> list[TablePlan]:
    """The tables to check, each with its connectors; ``PlanError`` for bad options."""
    chosen = chosen_connectors(config, names)
    with session.connect(config.source.conninfo()) as conn:
        published = published_tables(conn, config.source.publication)
    wanted = [split_table(table) for table in dict.fromkeys(tables)]
    missing = [f"{s}.{t}" for s, t in wanted if (s, t) not in published]
    if missing:
        raise PlanError(f"--table {', '.join(missing)}: not in publication "
                        f"{config.source.publication!r}")
    plans: list[TablePlan] = []
    for schema, table in wanted or published:
        topic = config.topic_for(schema, table)
        feeding = tuple(c for c in chosen if consumes(c, topic)
                        and not join_only(c, schema, table))
        if feeding:
            plans.append(TablePlan(schema, table, topic, feeding))
        elif wanted and not any(consumes(c, topic) for c in chosen):
            raise PlanError(f"--table {schema}.{table}: no chosen connector consumes its "
                            f"topic {topic}")
    return plans


def plan_joins(config: PipelineConfig, names: Sequence[str],
               tables: Sequence[str]) -> list[JoinPlan]:
    """The joined views to check: every one of the chosen connectors (``names``; none:
    every checkable one), or with ``tables`` those that read one of them."""
    wanted = {split_table(table) for table in tables}
    return [JoinPlan(connector, join) for connector in chosen_connectors(config, names)
            for join in joins_of(connector)
            if not wanted or wanted & join.tables()]
