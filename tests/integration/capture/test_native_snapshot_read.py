"""A real snapshot read through the native converter and through the Python reference
(``read_event`` and ``complete`` row by row, the path of a table the native core does not
convert: here every table, ``NativeTable.of`` made to refuse) gives the same records,
byte for byte."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc.capture.events import TableShape
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.native import NativeTable
from cdc.capture.snapshot.progress import SnapshotProgress
from cdc.capture.snapshot.read import read_tables
from cdc.capture.stream.replication import ReplicationConnection
from cdc.log import StartAt
from cdc.log.file import FileLog

# what differs between two snapshots of the same rows: their slot's point, the time
VARYING = re.compile(rb'"commit_ts":"[^"]*"|"(?:commit_)?lsn":"[0-9A-F]+/[0-9A-F]+"')
ROWS = 3000

TABLE = """
CREATE TABLE typed (
    id bigint PRIMARY KEY, small smallint, i int, flag boolean, name text,
    label varchar(20), code char(3), ident uuid, amount numeric, ratio float8,
    little float4, day date, at timestamp, at_tz timestamptz, doc jsonb, raw json, bin bytea,
    span interval, clock timetz, ints int[], words text[], nums int8range, during tstzrange)
"""
FILL = r"""
INSERT INTO typed SELECT g, (g %% 30000)::smallint, g * 7 - 9000000, g %% 3 = 0,
    'name ' || g || E'\t\n\\ "quoted" é ✓', 'label' || g, 'c' || (g %% 10),
    md5(g::text)::uuid, (g * 1.25)::numeric, g / 7.0, (g / 3.0)::float4,
    date '2024-02-29' + g, timestamp '2024-02-29 10:11:12.5' + g * interval '1 minute',
    timestamptz '2024-02-29 10:11:12+02' + g * interval '1 second',
    jsonb_build_object('id', g, 'name', 'n ' || g, 'list', jsonb_build_array(1, 2.5, true)),
    ('{"b": ' || g || ', "a": [1e5, "\\u00e9", null]}')::json,
    decode(md5(g::text), 'hex'),
    make_interval(g %% 7 - 3, g %% 13, 0, g %% 40 - 20, g %% 25, g %% 60, g / 1000.0),
    time with time zone '10:11:12.5+05:30' + g * interval '1 second',
    ARRAY[g, -g, NULL], ARRAY[['a ' || g, 'NULL'], ['"q"\', E'\t{}']],
    int8range(g, g * 2 + 1, '(]'),
    tstzrange(timestamptz '2024-02-29 10:11:12+02' + g * interval '1 hour', NULL)
FROM generate_series(1, %s) g
"""
ODD = r"""
INSERT INTO typed VALUES
    (-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (-2, -32768, -2147483648, false, '', '', '', '00000000-0000-0000-0000-000000000000',
     'NaN', 'NaN', 'Infinity', 'infinity', '-infinity', 'infinity', '[]', '{"a":1,"a":2}',
     '', '0', '00:00:00+00', '{}', '{}', 'empty', '(,)'),
    (-3, 32767, 2147483647, true, E'\\N', E'\\', 'abc', NULL, '-Infinity', '-Infinity',
     '1e-45', '0044-03-15 BC', '0044-03-15 12:00:00 BC', '0001-01-01 00:00:00+00 BC',
     '{"big": 12345678901234567890, "f": 0.1}', '[1.0, -0, "\t"]', '\x00ff80',
     '-177999999 years -11 mons -2147483647 days -2147483647:59:59.999999',
     '24:00:00-15:59:59', '[0:1]={1,2}', '{{"",NULL},{" x ","é"}}', '[-9223372036854775808,0)',
     '[-infinity,infinity]'),
    (-9223372036854775808, 0, 0, true, E'\x01\x1f', 'x', 'y', NULL,
     '123456789012345678901234567890.123456789', 1.7976931348623157e308, 3.4028235e38,
     '294276-12-31', '294276-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999+00',
     '"x"', '  {"deep": [[[{"k": "\u0000"}]]]}  ', '\x0a09',
     '177999999 years 2147483647 days 2147483647:59:59.999999', '00:00:00.000001-00:00:01',
     '{-2147483648}', '{"\\\\"}', '(,9223372036854775806]',
     '[0044-03-15 12:00:00+00 BC, 1999-12-31 23:59:59.999999+00)')
"""

NUMERIC_INFINITY_MIN_VERSION = 140000  # numeric ±Infinity (13: NaN in its place)


def _snapshot(dsn: str, log_dir: Path, slot: str) -> list[tuple[int, bytes, bytes]]:
    """``(seq, key, value)`` of every record of the table's snapshot, in order."""
    event_log = FileLog(log_dir)
    try:
        with psycopg.connect(dsn, autocommit=True) as catalog, \
                ReplicationConnection(dsn) as repl:
            point, name = repl.create_slot(slot, temporary=True, export_snapshot=True)
            assert name is not None
            outcome = read_tables(dsn, name, point, shapes=ShapeRegistry(catalog, "p"),
                                  producer=event_log.producer(),
                                  tables=[("public", "typed")], database="app",
                                  progress=SnapshotProgress(interactive=False))
        assert outcome.rows == ROWS + 4
        consumer = event_log.consumer("check", topics=["p.public.typed"],
                                      start=StartAt.earliest())
        found = []
        while batch := consumer.poll(10_000, timeout=0.3):
            found.extend(batch)
        consumer.close()
    finally:
        event_log.close()
    assert {m.position.commit_lsn for m in found} == {point}
    return sorted((m.position.seq, m.key, VARYING.sub(b"", m.value)) for m in found)


def _counting(convert: Callable[..., Any], chunks: list[int]) -> Callable[..., Any]:
    def counting(self: NativeTable, chunk: bytes, *args: Any) -> Any:
        chunks.append(len(chunk))
        return convert(self, chunk, *args)
    return counting


def _python_only(cls: type[NativeTable], shape: TableShape) -> NativeTable | None:
    """``NativeTable.of`` refusing every table: the snapshot reads them row by row."""
    return None


def test_native_and_reference_snapshots_are_the_same_bytes(
        fresh_database: str, unique_name: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(TABLE)
        conn.execute(FILL, (ROWS,))
        conn.execute(ODD if conn.info.server_version >= NUMERIC_INFINITY_MIN_VERSION
                     else ODD.replace("'-Infinity', '-Infinity'", "'NaN', '-Infinity'"))
    chunks: list[int] = []
    for name in ("records", "rows"):  # Records, or rows encoded natively for the file log
        monkeypatch.setattr(NativeTable, name, _counting(getattr(NativeTable, name), chunks))
    native = _snapshot(fresh_database, tmp_path / "native", f"{unique_name}_n")
    assert chunks, "the native path read the table"
    monkeypatch.setattr(NativeTable, "of", classmethod(_python_only))
    calls = len(chunks)
    reference = _snapshot(fresh_database, tmp_path / "reference", f"{unique_name}_r")
    assert len(chunks) == calls, "the reference made no native call"
    assert len(native) == len(reference) == ROWS + 4
    assert native == reference
