"""``cdc doctor`` against a physical standby: what logical decoding there needs."""

from __future__ import annotations

from typing import Any

import psycopg

from cdc.config.conninfo import dsn_secrets
from cdc.config.secrets import Redactor
from cdc.config.source import SourceConfig

from ..findings import Finding
from . import session
from .standby import STANDBY_MIN_VERSION

__all__ = ["standby_findings"]


def standby_findings(conn: psycopg.Connection[Any], source: SourceConfig) -> list[Finding]:
    """Nothing on a primary. On a standby: the version (16+), ``hot_standby_feedback``
    (``wal_level`` is checked for every server), and ``source.primary_dsn``."""
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if row is None or not row[0]:
        return []
    version = conn.info.server_version
    if version < STANDBY_MIN_VERSION:
        return [Finding("error", "standby", f"source.dsn is a standby running PostgreSQL "
                        f"{version // 10000}: logical decoding on a standby needs 16+",
                        "point source.dsn at the primary, or upgrade")]
    findings = [Finding("ok", "standby", "source.dsn is a standby (logical decoding on a "
                        "standby, PostgreSQL 16+); the publication comes from the primary")]
    row = conn.execute("SHOW hot_standby_feedback").fetchone()
    if row is not None and row[0] == "on":
        findings.append(Finding("ok", "hot_standby_feedback", "on"))
    else:
        findings.append(Finding(
            "error", "hot_standby_feedback", "is off: the primary may vacuum away catalog "
            "rows the standby's slot still needs, and the slot is then invalidated "
            "(conflict with recovery)", "on the standby: ALTER SYSTEM SET "
            "hot_standby_feedback = on; SELECT pg_reload_conf(); -- or set it in its "
            "postgresql.conf (and give it a physical slot: primary_slot_name)"))
    findings.append(_primary(source))
    return findings


def _primary(source: SourceConfig) -> Finding:
    """``source.primary_dsn``: what is off without it, or whether it is a usable primary."""
    primary = source.primary_conninfo()
    if primary is None:
        return Finding("warn", "primary_dsn", "not set: on a standby, heartbeats, "
                       "incremental snapshots and publication changes are off, and a new "
                       "slot waits for the primary's next running-transactions record",
                       "set source.primary_dsn to the primary (or run SELECT "
                       "pg_log_standby_snapshot(); on the primary while the slot is created)")
    try:
        with session.connect(primary) as conn:
            row = conn.execute("SELECT pg_is_in_recovery(), current_setting('wal_level')"
                               ).fetchone()
    except psycopg.OperationalError as exc:
        redactor = Redactor(dsn_secrets(primary))  # secrets never in the output
        first_line = redactor.scrub((str(exc).strip().splitlines() or [""])[0])
        if not first_line or redactor.leaks(first_line):
            first_line = type(exc).__name__
        return Finding("error", "primary_dsn", f"cannot connect: {first_line}",
                       "check source.primary_dsn")
    assert row is not None
    if row[0]:
        return Finding("error", "primary_dsn", "is a standby too: it must be the primary",
                       "point source.primary_dsn at the primary")
    if row[1] != "logical":
        return Finding("error", "primary_dsn", f"the primary's wal_level is {row[1]!r}: "
                       "decoding on the standby needs 'logical' on the primary",
                       "on the primary: ALTER SYSTEM SET wal_level = logical; -- then restart")
    return Finding("ok", "primary_dsn", "a primary with wal_level = logical")
