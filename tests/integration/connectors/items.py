"""The ``items`` table of the guarantee tests: a composite key, a TOASTed body, a view.

Both sinks write the view ``items``: columns renamed (``body`` → ``text``), a computed
``label``, a filter (``qty < 90``). ``expected`` computes the same records in SQL, so a
sink's state can be compared with the table row for row.

KNOWN_GAP: an update that brings a row back into the filter without changing its
TOASTed body cannot be derived: PostgreSQL does not resend the body (REPLICA IDENTITY
DEFAULT) and the sinks hold no record of a filtered-out row to take it from; the sinks
write the record without it (``test_filter_reentry_loses_unchanged_toast``). The random
workload's body-keeping updates therefore keep a row on its side of the filter.
"""

from __future__ import annotations

import random
from typing import Any, cast

import orjson
import redis
from opensearchpy import OpenSearch

from .harness import PipelineHarness

SCHEMA = """
CREATE TABLE items (tenant int, id int, title text NOT NULL, qty int NOT NULL, body text,
                    PRIMARY KEY (tenant, id));
ALTER TABLE items ALTER COLUMN body SET STORAGE EXTERNAL;
"""

Record = dict[str, Any]
Key = tuple[int, int]


def view_yaml(name: str, *, redis_key: bool) -> str:
    """The view both sinks apply (the Redis one names its keys)."""
    key = f'\n          key_template: "{name}:item:{{key.tenant}}:{{key.id}}"' if redis_key else ""
    return f"""
        - source: public.items
          target: {name}_items{key}
          fields: [tenant, id, title, qty, body]
          rename: {{body: text}}
          computed: {{label: "concat(upper(title), '#', qty)"}}
          filter: "qty < 90\""""


def connectors_yaml(name: str, opensearch_url: str, redis_url: str) -> str:
    """A ``search`` (OpenSearch) and a ``cache`` (Redis) connector, both on the view."""
    return f"""
  - name: search
    type: opensearch
    topics: [{name}.public.items]
    batch_timeout: 100ms
    batch_size: 200
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
      views:{view_yaml(name, redis_key=False)}
  - name: cache
    type: redis
    topics: [{name}.public.items]
    batch_timeout: 100ms
    batch_size: 200
    config:
      url: {redis_url}
      key_template: "{name}:raw:{{key}}"
      views:{view_yaml(name, redis_key=True)}
"""


def _body(rng: random.Random) -> str:
    """A text PostgreSQL stores out of line (over 2 kB, STORAGE EXTERNAL: not compressed)."""
    return f"{rng.getrandbits(64):016x}" * 250


def workload(harness: PipelineHarness, seed: int, transactions: int = 60) -> None:
    """Random inserts, updates (mostly leaving the body TOASTed and unchanged), deletes,
    and one truncate half-way, in multi-statement transactions."""
    rng = random.Random(seed)
    truncate_at = transactions // 2
    for number in range(transactions):
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if number == truncate_at:
            statements.append(("TRUNCATE items", ()))
        for _ in range(rng.randint(1, 8)):
            tenant, item = rng.randint(1, 3), rng.randint(1, 60)
            action = rng.random()
            if action < 0.4:
                statements.append(("INSERT INTO items VALUES (%s, %s, %s, %s, %s) "
                                   "ON CONFLICT DO NOTHING",
                                   (tenant, item, f"t{rng.randint(0, 999)}",
                                    rng.randint(0, 99), _body(rng))))
            elif action < 0.75:  # the body stays TOASTed, unchanged; the row stays on
                qty = rng.randint(0, 99)  # its side of the filter (see KNOWN_GAP)
                statements.append(("UPDATE items SET title = %s, qty = %s "
                                   "WHERE tenant = %s AND id = %s AND (qty < 90) = (%s < 90)",
                                   (f"u{rng.randint(0, 999)}", qty, tenant, item, qty)))
            elif action < 0.85:
                statements.append(("UPDATE items SET body = %s, qty = %s "
                                   "WHERE tenant = %s AND id = %s",
                                   (_body(rng), rng.randint(0, 99), tenant, item)))
            else:
                statements.append(("DELETE FROM items WHERE tenant = %s AND id = %s",
                                   (tenant, item)))
        with harness.connect() as conn:
            for statement, params in statements:
                conn.execute(statement.encode(), params)


def expected(harness: PipelineHarness) -> dict[Key, Record]:
    """The view's records, computed by PostgreSQL."""
    rows = harness.query("SELECT tenant, id, title, qty, body, upper(title) || '#' || qty "
                         "FROM items WHERE qty < 90")
    return {(r[0], r[1]): {"tenant": r[0], "id": r[1], "title": r[2], "qty": r[3],
                           "text": r[4], "label": r[5]} for r in rows}


def search_state(client: OpenSearch, alias: str) -> dict[Key, tuple[int, Record]]:
    """(tenant, id) → (``_version``, ``_source``) of every document behind ``alias``."""
    if not client.indices.exists(index=alias):
        return {}
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 10_000, "version": True,
                                             "query": {"match_all": {}}})
    return {(h["_source"]["tenant"], h["_source"]["id"]): (h["_version"], h["_source"])
            for h in found["hits"]["hits"]}


def cache_state(client: redis.Redis, name: str) -> dict[Key, Record]:
    """(tenant, id) → the JSON record of every ``<name>:item:*`` key."""
    keys = sorted(client.scan_iter(match=f"{name}:item:*", count=1000))
    values = cast(list[bytes | None], client.mget(keys)) if keys else []
    found: dict[Key, Record] = {}
    for value in values:
        if value is not None:
            record = orjson.loads(value)
            found[record["tenant"], record["id"]] = record
    return found


def cache_versions(client: redis.Redis, name: str) -> dict[bytes, int]:
    """Key → stored version (``_cdc_version:<key>``), tombstones included."""
    keys = sorted(client.scan_iter(match=f"_cdc_version:{name}:item:*", count=1000))
    values = cast(list[bytes | None], client.mget(keys)) if keys else []
    return {key: int(value) for key, value in zip(keys, values, strict=True)
            if value is not None}


def records(state: dict[Key, tuple[int, Record]]) -> dict[Key, Record]:
    return {key: source for key, (_, source) in state.items()}
