"""The soak's tables.

- ``accounts``: a fixed key space the workload sweeps with updates (every account is
  touched every few seconds, so a compacted log still holds each one's newest event); a
  tenth carry a ``doc`` stored out of line (TOAST, uncompressed), which most updates
  leave unchanged.
- ``orders``: a queue: new orders inserted, the oldest deleted, a minute of them alive.
- ``soak_clock``: one row whose ``at_us`` each workload transaction sets to the writer's
  clock, read back from Redis and OpenSearch by the lag probes.
"""

from __future__ import annotations

import psycopg

TABLES = ("accounts", "orders", "soak_clock")
CLOCK_TABLE = "soak_clock"

_SCHEMA = (
    "CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, "
    "touches bigint NOT NULL, name text NOT NULL, doc text)",
    "ALTER TABLE accounts ALTER COLUMN doc SET STORAGE EXTERNAL",
    "CREATE TABLE orders (id bigint PRIMARY KEY, account bigint NOT NULL, "
    "amount numeric(12, 2) NOT NULL, placed_at timestamptz NOT NULL)",
    "CREATE TABLE soak_clock (id int PRIMARY KEY, at_us bigint NOT NULL)",
)

DOC_REPEATS = 150
"""A doc is an md5 repeated this often: 4,800 characters, out of line and uncompressed."""


def create_schema(dsn: str, accounts: int, orders: int) -> None:
    """The tables, ``accounts`` accounts (every tenth with a doc) and ``orders`` orders."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO accounts SELECT g, 0, 0, 'account ' || g, CASE WHEN g %% 10 = 0 "
            "THEN repeat(md5(g::text), %s) END FROM generate_series(1, %s) g",
            (DOC_REPEATS, accounts))
        conn.execute("INSERT INTO orders SELECT g, g %% %s + 1, (g %% 10000) / 100.0, now() "
                     "FROM generate_series(1, %s) g", (accounts, orders))
        conn.execute("INSERT INTO soak_clock VALUES (1, 0)")
