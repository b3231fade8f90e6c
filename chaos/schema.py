"""The chaos schema: composite keys, TOAST-sized values, and the audit trail.

Every published table has the key ``(tenant, id)``. Row triggers write each change to
``chaos_audit`` in the same transaction (so exactly the committed changes are there, in
the order they were made); a statement trigger records each ``TRUNCATE``. The audit
table is not published: it is the ground truth the log is checked against, recorded by
PostgreSQL itself and independent of the capture. TOAST-sized ``body`` values are
recorded as their md5 to keep the audit small.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

TABLES = ("items", "notes", "bulk")
KEY_COLUMNS = ("tenant", "id")

_TABLE_DDL = {
    "items": "CREATE TABLE items (tenant int, id bigint, qty int NOT NULL, "
             "label text NOT NULL, body text, PRIMARY KEY (tenant, id))",
    "notes": "CREATE TABLE notes (tenant int, id bigint, note text NOT NULL, "
             "PRIMARY KEY (tenant, id))",
    "bulk": "CREATE TABLE bulk (tenant int, id bigint, n int NOT NULL, "
            "PRIMARY KEY (tenant, id))",
}

_AUDIT_DDL = """
CREATE TABLE chaos_audit (
    id bigserial PRIMARY KEY,
    txid bigint NOT NULL DEFAULT txid_current(),
    tbl text NOT NULL,
    op char(1) NOT NULL,
    key jsonb,
    row jsonb
);
CREATE FUNCTION chaos_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    image jsonb;
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO chaos_audit (tbl, op, key, row) VALUES
            (TG_TABLE_NAME, 'd', jsonb_build_object('tenant', OLD.tenant, 'id', OLD.id), NULL);
        RETURN OLD;
    END IF;
    image := to_jsonb(NEW);
    IF image->>'body' IS NOT NULL THEN
        image := jsonb_set(image, '{body}', to_jsonb(md5(image->>'body')));
    END IF;
    INSERT INTO chaos_audit (tbl, op, key, row) VALUES
        (TG_TABLE_NAME, CASE TG_OP WHEN 'INSERT' THEN 'c' ELSE 'u' END,
         jsonb_build_object('tenant', NEW.tenant, 'id', NEW.id), image);
    RETURN NEW;
END $$;
CREATE FUNCTION chaos_audit_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_audit (tbl, op) VALUES (TG_TABLE_NAME, 't');
    RETURN NULL;
END $$;
"""


def create_schema(dsn: str) -> None:
    """Create the tables, the audit table and the triggers (a fresh database)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(_AUDIT_DDL.encode())
        for table in TABLES:
            conn.execute(_TABLE_DDL[table].encode())
            name = sql.Identifier(table)
            conn.execute(sql.SQL(
                "CREATE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW "
                "EXECUTE FUNCTION chaos_audit_row()").format(
                    sql.Identifier(f"{table}_audit"), name))
            conn.execute(sql.SQL(
                "CREATE TRIGGER {} AFTER TRUNCATE ON {} FOR EACH STATEMENT "
                "EXECUTE FUNCTION chaos_audit_truncate()").format(
                    sql.Identifier(f"{table}_audit_truncate"), name))


def table_rows(dsn: str, table: str) -> dict[str, dict[str, Any]]:
    """The table's rows as JSON objects (``body`` as its md5), by ``"tenant:id"``."""
    query = sql.SQL("SELECT to_jsonb(t) FROM {} t").format(sql.Identifier(table))
    rows: dict[str, dict[str, Any]] = {}
    with psycopg.connect(dsn) as conn:
        for (row,) in conn.execute(query):
            if row.get("body") is not None:
                row["body"] = _md5(row["body"])
            rows[f"{row['tenant']}:{row['id']}"] = row
    return rows


def _md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def body_digest(text: str) -> str:
    """What the audit stores for a ``body`` value (its md5, as PostgreSQL computes it)."""
    return _md5(text)
