"""Rows made a chunk at a time give what the row-by-row reference gives: the event key's
text is ``encode_key``'s, the chunk key is the COPY line's, and the targets' mapped
``encoded`` equals rendering each row's key and dumping its ``after``."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis

from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.placeholders import TableNames
from connectors.reconcile.opensearch_target import OpenSearchTarget
from connectors.reconcile.redis_target import RedisTarget
from connectors.reconcile.rows import SourceRow, encoded_keys, key_text_of
from connectors.redis.config import RedisSinkConfig
from connectors.redis.keys import KeyTemplates
from derived import encode_key

NAMES = TableNames("app", "app.public.orders", "public", "orders")


@pytest.mark.parametrize("values", [[1, 2, -3, 2**70], ["a", "b:c", "", "é\\x"],
                                    [1, "two"], [True, False], [None, 1], [1.5, 2]])
def test_encoded_keys_of_one_column_are_encode_key(values: list[Any]) -> None:
    keys = [{"id": value} for value in values]
    assert encoded_keys(keys, ["id"]) == [encode_key(key) for key in keys]


def test_encoded_keys_of_several_columns_are_encode_key() -> None:
    keys: list[dict[str, Any]] = [{"a": 1, "b": "x:y"}, {"a": None, "b": "\\"}]
    assert encoded_keys(keys, ["a", "b"]) == [encode_key(key) for key in keys]


def test_key_text_of_reads_the_chunk_key_columns_of_a_copy_line() -> None:
    assert key_text_of((0,), b"42\tpaid\t1.5") == ("42",)
    assert key_text_of((1,), b"42\ta\\tb\t1.5") == ("a\tb",)  # an escape: COPY's rules
    assert key_text_of((2, 0), b"42\tpaid\t7") == ("7", "42")


def test_source_row_fields() -> None:
    row = SourceRow({"id": 7}, None, ("7",), "1@(0,1)", after_json=b'{"id":7,"s":"a"}')
    assert (row.key, row.key_text, row.stamp, row.id_text) == ({"id": 7}, ("7",), "1@(0,1)",
                                                               "7")
    assert row.after == {"id": 7, "s": "a"}
    assert SourceRow({"id": 8}, {"id": 8}, ("8",)).after == {"id": 8}


def _rows() -> list[SourceRow]:
    return [SourceRow({"id": i}, None, (str(i),), after_json=orjson.dumps({"id": i, "n": "x"}))
            for i in (1, 22, 333)]


@pytest.mark.parametrize("template", ["{prefix}:{table}:{key}", "k{key}tail", "{key.id}:{table}",
                                      "{key}:{key.id}"])
def test_redis_encoded_equals_rendering_each_key(template: str) -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://localhost:1",
                                             "key_template": template})
    target = RedisTarget("cache", config, NAMES, None, client=redis.Redis())
    render = KeyTemplates(template).table(NAMES, None).render
    rows = _rows()
    assert target.encoded(rows) == {render(row.key): (row.after_json, row) for row in rows}


def test_opensearch_encoded_equals_each_documents_id() -> None:
    config = OpenSearchSinkConfig.model_validate({"hosts": ["http://localhost:1"],
                                                  "index": "app_{table}"})
    target = OpenSearchTarget("search", config, NAMES, None, client=object())  # type: ignore[arg-type]
    too_long = SourceRow({"id": "x" * 600}, None, ("x",), after_json=b'{"id":0}')  # no such _id
    rows = [*_rows(), too_long]
    assert target.encoded(rows) == {encode_key(row.key): (row.after_json, row)
                                    for row in rows[:3]}
