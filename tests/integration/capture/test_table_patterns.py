"""``source.tables`` patterns on a real PostgreSQL: the publication made to match, new
matching tables added while streaming (and snapshotted), ``cdc doctor`` listing them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

from cdc.capture.doctor import diagnose
from cdc.capture.runner import Capture
from cdc.capture.source.messages import sends_messages
from cdc.capture.source.publication import ensure_publication, sync_publication
from cdc.config import load_config

from .conftest import FREQUENT_CHECKS, CaptureEnv, server_version
from .snapshot_check import wait_state

SCHEMA = (
    "CREATE SCHEMA sales",
    'CREATE SCHEMA "Odd Schema"',
    "CREATE TABLE public.orders (id int PRIMARY KEY)",
    "CREATE TABLE public.audit_log (id int PRIMARY KEY)",
    "CREATE TABLE sales.order_lines (id int PRIMARY KEY)",
    "CREATE TABLE sales.order_tmp (id int PRIMARY KEY)",
    "CREATE TABLE sales.customers (id int PRIMARY KEY)",
    'CREATE TABLE "Odd Schema"."We.ird" (id int PRIMARY KEY)',
)
SCHEMA_FORM_MIN_VERSION = 150000  # FOR TABLES IN SCHEMA


def publication_state(dsn: str, name: str) -> tuple[set[str], set[str], set[str]]:
    """(schemas published whole, tables published by name, every published table).

    Schemas are published whole (``FOR TABLES IN SCHEMA``, ``pg_publication_namespace``)
    from PostgreSQL 15 on; before, there is no such form and the first set is empty."""
    with psycopg.connect(dsn) as conn:
        schemas: set[str] = set()
        if conn.info.server_version >= SCHEMA_FORM_MIN_VERSION:
            schemas = {r[0] for r in conn.execute(
                "SELECT n.nspname FROM pg_publication_namespace pn JOIN pg_publication p"
                " ON p.oid = pn.pnpubid JOIN pg_namespace n ON n.oid = pn.pnnspid"
                " WHERE p.pubname = %s", (name,))}
        named = {f"{r[0]}.{r[1]}" for r in conn.execute(
            "SELECT n.nspname, c.relname FROM pg_publication_rel r JOIN pg_publication p"
            " ON p.oid = r.prpubid JOIN pg_class c ON c.oid = r.prrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = %s", (name,))}
        every = {f"{r[0]}.{r[1]}" for r in conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            (name,))}
    return schemas, named, every


def schema_form(dsn: str) -> bool:
    """Whether the server publishes a schema whole (``FOR TABLES IN SCHEMA``, 15+)."""
    with psycopg.connect(dsn) as conn:
        return conn.info.server_version >= SCHEMA_FORM_MIN_VERSION


def test_publication_matches_the_patterns_and_follows_new_tables(
        fresh_database: str, unique_name: str) -> None:
    with psycopg.connect(fresh_database) as conn:
        for statement in SCHEMA:
            conn.execute(statement.encode())
    patterns = ("public.*", "sales.order_*", "!sales.order_tmp", '"Odd Schema"."We.ird"')
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        added = ensure_publication(conn, unique_name, patterns)
    # 15+: public whole (FOR TABLES IN SCHEMA, untouched by an exclusion); before, every
    # table by name — the same tables published either way
    whole = schema_form(fresh_database)
    by_name = {"sales.order_lines", "Odd Schema.We.ird"}
    public = {"public.orders", "public.audit_log"}
    assert {f"{s}.{t}" for s, t in added} == (by_name if whole else by_name | public)
    schemas, named, every = publication_state(fresh_database, unique_name)
    assert schemas == ({"public"} if whole else set())
    assert named == (by_name if whole else by_name | public)
    assert every == public | by_name

    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE sales.order_new (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE sales.other (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE public.fresh (id int PRIMARY KEY)")
        sync_publication(conn, unique_name, patterns)
    schemas, named, every = publication_state(fresh_database, unique_name)
    by_name.add("sales.order_new")
    assert named == (by_name if whole else by_name | public | {"public.fresh"})
    assert "public.fresh" in every and "sales.other" not in every
    assert "sales.order_tmp" not in every


def test_an_exclusion_in_a_schema_lists_its_tables_by_name(
        fresh_database: str, unique_name: str) -> None:
    with psycopg.connect(fresh_database) as conn:
        for statement in SCHEMA:
            conn.execute(statement.encode())
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        ensure_publication(conn, unique_name, ("public.*", "!public.audit_*"))
    schemas, named, _ = publication_state(fresh_database, unique_name)
    assert schemas == set()
    assert named == {"public.orders"}


def test_doctor_lists_what_the_patterns_select(capture_env: CaptureEnv) -> None:
    capture_env.sql(*SCHEMA)
    text = capture_env.config_path.read_text().replace(
        "  heartbeat_interval: 1s\n",
        "  heartbeat_interval: 1s\n  tables: ['sales.*', '!sales.order_tmp', "
        "'public.nothing_*', 'public.missing']\n")
    capture_env.config_path.write_text(text)
    config = load_config(capture_env.config_path)
    findings = {(f.level, f.check, f.detail) for f in diagnose(config)}
    assert ("ok", "tables", "source.tables selects 2 tables: sales.customers, "
            "sales.order_lines") in findings
    assert ("warn", "tables", "patterns that select no table: public.nothing_*") in findings
    assert ("error", "tables", "configured but not found: public.missing") in findings


def test_capture_streams_selected_tables_and_snapshots_new_ones(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture]) -> None:
    capture_env.sql("CREATE TABLE orders (id int PRIMARY KEY)",
                    "CREATE TABLE audit_log (id int PRIMARY KEY)",
                    "INSERT INTO orders VALUES (1)", "INSERT INTO audit_log VALUES (1)")
    text = capture_env.config_path.read_text().replace(
        "  heartbeat_interval: 1s\n",
        "  heartbeat_interval: 1s\n  tables: ['public.*', '!public.audit_*']\n")
    capture_env.config_path.write_text(text)
    run_capture(FREQUENT_CHECKS)  # sync the publication often
    capture_env.sql("INSERT INTO orders VALUES (2)", "INSERT INTO audit_log VALUES (2)")
    # created while streaming: its first row precedes its joining the publication
    capture_env.sql("CREATE TABLE late (id int PRIMARY KEY)", "INSERT INTO late VALUES (1)")
    assert [e["op"] for e in _values_when(capture_env, "orders", 2)] == ["r", "c"]
    if not sends_messages(server_version(capture_env.dsn)):
        # PostgreSQL 13: no incremental snapshot (no watermarks): it fails, saying so,
        # and only the rows written after the table joined arrive
        failed = wait_state(capture_env, "public.late", "failed", timeout=30)
        assert failed.reason is not None and "PostgreSQL 13" in failed.reason
        assert "--recreate-lost-slot" in failed.reason
        capture_env.sql("INSERT INTO late VALUES (2)")
        assert {e["after"]["id"] for e in _values_when(capture_env, "late", 1)} == {2}
        assert capture_env.events("audit_log") == []
        return
    assert {e["after"]["id"] for e in _values_when(capture_env, "late", 1)} == {1}
    capture_env.sql("INSERT INTO late VALUES (2)")
    assert {e["after"]["id"] for e in _values_when(capture_env, "late", 2)} == {1, 2}
    assert capture_env.events("audit_log") == []


def _values_when(env: CaptureEnv, table: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        values = env.values(table)
        if len(values) >= count or time.monotonic() > deadline:
            return values
        time.sleep(0.2)


def test_doctor_summarizes_many_tables(fresh_database: str, unique_name: str,
                                       postgres_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(fresh_database) as conn:
        conn.execute("DO $$ BEGIN FOR i IN 0 .. 24 LOOP EXECUTE format("
                     "'CREATE TABLE %I (id int PRIMARY KEY)', 'bulk_' || lpad(i::text, 2, '0'));"
                     " END LOOP; END $$")
    role = f"{unique_name}_reader"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION").format(sql.Identifier(role)))
    try:
        dsn = conninfo.make_conninfo(fresh_database, user=role)
        config = tmp_path / "pipeline.yaml"
        config.write_text(f"source:\n  dsn: '{dsn}'\n  slot: {unique_name}\n"
                          f"  publication: {unique_name}\n  tables: ['public.bulk_*']\n"
                          f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n")
        findings = diagnose(load_config(config))
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    details = {(f.level, f.check): f.detail for f in findings}
    assert details["ok", "tables"] == ("source.tables selects 25 tables: " + ", ".join(
        f"public.bulk_{i:02d}" for i in range(20)) + " … and 5 more")
    assert details["ok", "replica identity"] == "25 tables can publish updates and deletes"
    assert details["error", "select public.*"].startswith(
        f"role {role} lacks SELECT on 25 tables of schema public")
    assert not any(f.check.startswith("select public.bulk_") for f in findings)
