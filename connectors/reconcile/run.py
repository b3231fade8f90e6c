"""One table against its connectors: targets built from each connector's config, the
walk, and the repair of what it found (waiting until it has landed); and one joined
view of a connector (``reconcile_join``: ``join_walk``)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from cdc.capture.source import session
from cdc.config import ConnectorConfig, PipelineConfig
from cdc.extras import MissingExtraError, missing_extra
from cdc.log import Log
from cdc.log.open import open_log
from connectors.placeholders import TableNames
from derived import ViewDefinition

from .catchup import wait_consumed, wait_logged
from .compare import Kind
from .join_source import JoinedSource
from .join_walk import JoinTarget, JoinWalk, repair_join
from .plan import JoinPlan, TablePlan
from .repair import delete_extras, repair_state, request_snapshot, wait_repaired
from .schema_history import explain, last_column_change
from .source import KeyText, TableSource
from .target import Target
from .walk import CatchUp, TableFindings, TableWalk

_TARGETS = {"opensearch": ("connectors.reconcile.opensearch_target", "OpenSearchTarget"),
            "redis": ("connectors.reconcile.redis_target", "RedisTarget")}


@dataclass
class TableOutcome:
    """What the walk found, and what the repair did (one line each)."""

    findings: TableFindings
    repairs: list[str] = field(default_factory=list)


def target_class(connector: ConnectorConfig) -> Any:
    """The ``Target`` class for ``connector``'s sink; ``MissingExtraError`` when the
    sink's client library is not installed."""
    module, name = _TARGETS[connector.type]
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        raise MissingExtraError("cdc reconcile", extra) from None


def targets_of(plan: TablePlan, prefix: str) -> Iterator[Target]:
    """One target per connector and view of the table (or one without a view)."""
    names = TableNames.of(plan.topic, {"schema": plan.schema, "table": plan.name}, prefix)
    for connector in plan.connectors:
        make = target_class(connector)
        views = [view for view in getattr(connector.config, "views", ())
                 if view.table == (plan.schema, plan.name)] or [None]
        for view in views:
            yield make(connector.name, connector.config, names, view)


def reconcile_table(config: PipelineConfig, plan: TablePlan, *, repair: bool,
                    rate: float | None, chunk: int, timeout: float) -> TableOutcome:
    """Walk ``plan``'s table (see ``walk``) and, with ``repair``, repair what differs."""
    with ExitStack() as stack:
        source = TableSource(config.source.conninfo(), plan.schema, plan.name,
                             config.topic_names, config.source.publication)
        stack.callback(source.close)
        event_log = open_log(config.log)
        stack.callback(event_log.close)
        targets: list[Target] = []
        for target in targets_of(plan, config.topic_prefix):
            stack.callback(target.close)
            targets.append(target)

        def catch_up(lsn: int) -> None:
            wait_logged(source.conn, config.source.slot, lsn, timeout)
            for connector in plan.connectors:
                wait_consumed(event_log, connector.name, [plan.topic], timeout)

        findings = TableWalk(source, targets, catch_up, chunk_rows=chunk, rate=rate).run()
        if findings.differences:
            change = last_column_change(event_log, config.topic_prefix, plan.table)
            for found in findings.targets:
                found.differences = explain(found.differences, change)
        outcome = TableOutcome(findings)
        if repair and findings.differences:
            _repair(outcome, source, catch_up, event_log, config.topic_prefix, timeout)
        return outcome


def _repair(outcome: TableOutcome, source: TableSource, catch_up: CatchUp, event_log: Log,
            prefix: str, timeout: float) -> None:
    findings = outcome.findings
    rows: set[KeyText] = set()
    for found in findings.targets:
        extras: list[str] = []
        for difference in found.differences:
            key = found.keys.get(difference.sink_id)
            if difference.kind is Kind.EXTRA and key is None:
                extras.append(difference.sink_id)
            elif key is not None:
                rows.add(key)
        if extras:
            deleted = delete_extras(source, found.target, extras, findings.walk_start,
                                    catch_up)
            outcome.repairs.append(f"deleted {deleted} of {len(extras)} extra records in "
                                   f"{found.target.label}")
    if rows:
        before = source.current_lsn()
        lsn = request_snapshot(source, sorted(rows), event_log, prefix)
        outcome.repairs.append(f"requested an incremental snapshot of {len(rows)} rows of "
                               f"{source.name} (WAL {lsn}); the running capture rewrites them")
        wait_repaired(lambda: repair_state(event_log, prefix, source.name, before),
                      source.name, lambda: catch_up(source.current_lsn()), timeout)
        outcome.repairs.append(f"the snapshot of {source.name} completed and the sinks "
                               "caught up with it")


def join_target(config: PipelineConfig, plan: JoinPlan) -> JoinTarget:
    """The target of ``plan``'s records: the alias ``join.target`` (OpenSearch), or the
    keys ``join.key_template or key_template`` renders with the root table's names
    (Redis), as a plain view of the root table would have them."""
    join, connector = plan.join, plan.connector
    schema, table = join.table
    names = TableNames.of(config.topic_for(schema, table),
                          {"schema": schema, "table": table}, config.topic_prefix)
    view = ViewDefinition(source=join.source, target=join.target,
                          key_template=join.key_template)
    made: JoinTarget = target_class(connector)(connector.name, connector.config, names, view)
    return made


def reconcile_join(config: PipelineConfig, plan: JoinPlan, *, repair: bool, timeout: float,
                   rate: float | None = None, chunk: int = 2000,
                   catch_up: CatchUp | None = None) -> TableOutcome:
    """Walk ``plan``'s joined view (``join_walk``) and, with ``repair``, repair what
    differs in the sink. ``catch_up``: how to wait until the sink holds everything
    before a WAL position (default: the capture's slot, then the connector's group on
    the topics of every table of the view). ``rate``: root rows per second at most;
    ``chunk``: root rows per batch."""
    with ExitStack() as stack:
        source = JoinedSource(config.source.conninfo(), plan.join, config.topic_names,
                              config.source.publication, fetch=chunk)
        stack.callback(source.close)
        target = join_target(config, plan)
        stack.callback(target.close)
        if catch_up is None:
            catch_up = _join_catch_up(config, plan, stack, timeout)
        findings = JoinWalk(source, [target], catch_up, rate).run()
        findings.table = plan.table
        outcome = TableOutcome(findings)
        if repair and findings.differences:
            for found in findings.targets:
                outcome.repairs += repair_join(source, found, catch_up, findings.walk_start)
        return outcome


def _join_catch_up(config: PipelineConfig, plan: JoinPlan, stack: ExitStack,
                   timeout: float) -> CatchUp:
    """Wait for the capture's slot (on a connection of its own: the walk's is in a
    snapshot) and the connector's group on the topics of the view's tables."""
    conn = session.connect(config.source.conninfo())
    stack.callback(conn.close)
    event_log = open_log(config.log)
    stack.callback(event_log.close)
    topics = [config.topic_for(schema, table) for schema, table in sorted(plan.join.tables())]

    def catch_up(lsn: int) -> None:
        wait_logged(conn, config.source.slot, lsn, timeout)
        wait_consumed(event_log, plan.connector.name, topics, timeout)

    return catch_up
