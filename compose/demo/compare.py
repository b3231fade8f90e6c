"""Read every copy of the shop (OpenSearch, Redis, Spark output) and diff it with
PostgreSQL, row for row, after bringing values to one form (``shop.normalize``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis
import sqlalchemy as sa
from opensearchpy import OpenSearch

from . import shop

Tables = dict[str, dict[str, shop.Row]]


def diff_rows(what: str, want: Mapping[str, shop.Row], got: Mapping[str, shop.Row],
              limit: int = 3) -> list[str]:
    """Lines naming missing, extra and different rows of ``got`` (at most ``limit`` each)."""
    missing = sorted(set(want) - set(got), key=_sort_key)
    extra = sorted(set(got) - set(want), key=_sort_key)
    changed = sorted((k for k in set(want) & set(got) if want[k] != got[k]), key=_sort_key)
    problems = []
    if missing:
        problems.append(f"{what}: {len(missing)} rows missing (keys {missing[:limit]})")
    if extra:
        problems.append(f"{what}: {len(extra)} rows too many (keys {extra[:limit]})")
    for key in changed[:limit]:
        fields = {c for c in want[key] if want[key][c] != got[key].get(c)}
        problems.append(f"{what}: key {key} differs in {sorted(fields)}: "
                        f"{ {c: got[key].get(c) for c in fields} } instead of "
                        f"{ {c: want[key][c] for c in fields} }")
    if len(changed) > limit:
        problems.append(f"{what}: {len(changed)} rows differ in all")
    return problems


def _sort_key(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (0, key)


def read_opensearch(url: str, index_prefix: str, tables: tuple[sa.Table, ...]) -> Tables:
    """Every document of each table's index (``<prefix>_<table>``), normalized."""
    client = OpenSearch([url])
    found: Tables = {}
    try:
        for table in tables:
            index = f"{index_prefix}_{table.name}"
            found[table.name] = {}
            if not client.indices.exists(index=index):
                continue
            client.indices.refresh(index=index)
            hits = client.search(index=index, body={"query": {"match_all": {}},
                                                    "size": 10_000})["hits"]["hits"]
            for hit in hits:
                found[table.name][str(hit["_id"])] = shop.normalize(table, hit["_source"])
    finally:
        client.close()
    return found


def read_redis(url: str, key_prefix: str, tables: tuple[sa.Table, ...]) -> Tables:
    """Every cached row of each table (keys ``<prefix>:<table>:<key>``), normalized."""
    client = redis.Redis.from_url(url)
    found: Tables = {}
    try:
        for table in tables:
            head = f"{key_prefix}:{table.name}:"
            rows = found[table.name] = {}
            for key in client.scan_iter(match=head + "*", count=1000):
                value: Any = client.get(key)
                if value is not None:
                    rows[key.decode()[len(head):]] = shop.normalize(table, json.loads(value))
    finally:
        client.close()
    return found


def cached_tables(topic_pattern: str | None, topics: tuple[str, ...] | None,
                  topic_prefix: str) -> tuple[sa.Table, ...]:
    """The shop tables a connector reads (its topic list or pattern)."""
    import re

    chosen = []
    for table in shop.TABLES:
        topic = f"{topic_prefix}.public.{table.name}"
        matches = topic_pattern is not None and re.search(topic_pattern, topic) is not None
        if topic in (topics or ()) or matches:
            chosen.append(table)
    return tuple(chosen)
