"""What a demo run creates on the servers — a database, a slot, indices, cache keys —
and removes again, so runs can share servers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import redis
from opensearchpy import OpenSearch
from psycopg import sql


def database_dsn(server_dsn: str, name: str) -> str:
    """``server_dsn`` with its database replaced by ``name`` (libpq URL)."""
    base, _, tail = server_dsn.partition("://")
    authority, _, rest = tail.partition("/")
    query = rest.partition("?")[2]
    return f"{base}://{authority}/{name}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def demo_database(server_dsn: str, name: str) -> Iterator[str]:
    """Create database ``name``; afterwards drop it and the replication slot ``name``."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_dsn(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (name,))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))


def remove_search_indices(url: str, prefix: str) -> None:
    """Delete the indices (and their aliases) named ``<prefix>_…``."""
    client = OpenSearch([url])
    try:
        found = client.indices.get(index=f"{prefix}_*", expand_wildcards="all")
        for index in found:
            client.indices.delete(index=index)
    finally:
        client.close()


def remove_cache_keys(url: str, prefix: str) -> None:
    """Delete the cache keys of a run: ``<prefix>:…`` and their version keys."""
    client = redis.Redis.from_url(url)
    try:
        batch = list(client.scan_iter(match=f"*{prefix}:*", count=1000))
        for start in range(0, len(batch), 500):
            client.delete(*batch[start:start + 500])
    finally:
        client.close()
