"""DDL messages reach ``<prefix>._ddl`` inside their transaction, streamed or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import orjson

from cdc.capture.pgoutput import (
    Begin,
    Commit,
    LogicalMessage,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from cdc.capture.schema.ddl import DDL_PREFIX
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.stream.spool import StreamSpool
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.log import Position

DDL = orjson.dumps({"tag": "ALTER TABLE", "command": "ALTER TABLE t ADD COLUMN x int"})


def _assembler(tmp_path: Path) -> TransactionAssembler:
    assembler = TransactionAssembler(cast(ShapeRegistry, None), StreamSpool(tmp_path / "spool"),
                                     "app", "app.messages", frozenset({"outbox"}))
    assembler.topic_of_prefix[DDL_PREFIX] = "app._ddl"
    return assembler


def _message(xid: int | None = None, prefix: str = DDL_PREFIX) -> LogicalMessage:
    return LogicalMessage(True, 0x100, prefix, DDL, xid=xid)


def test_a_ddl_message_goes_to_the_ddl_topic_with_its_transaction(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(Begin(0x200, 0, 7), 0x100)
    assembler.feed(_message(), 0x100)
    assembler.feed(_message(prefix="elsewhere"), 0x110)  # not captured
    assembler.feed(Commit(0, 0x200, 0x210, 0), 0x200)
    (record,) = assembler.ready
    assert record.topic == "app._ddl" and record.position == Position(0x200, 0)
    event: dict[str, Any] = orjson.loads(record.value)
    assert event["message"]["content"]["command"] == "ALTER TABLE t ADD COLUMN x int"
    assert event["source"]["txid"] == 7


def test_a_ddl_message_of_a_streamed_transaction_waits_for_its_commit(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    for xid, end in ((8, "commit"), (9, "abort")):
        assembler.feed(StreamStart(xid, True), 0x100)
        assembler.feed(_message(xid), 0x100)
        assembler.feed(StreamStop(), 0x100)
        assert len(assembler.ready) == (xid == 9), "nothing before the transaction commits"
        if end == "abort":
            assembler.feed(StreamAbort(xid, xid), 0x300)
        else:
            assembler.feed(StreamCommit(0, 0x300, 0x310, 0, xid=xid), 0x300)
            assembler.drain(100)
            assembler.drain(100)
    (record,) = assembler.ready
    assert record.topic == "app._ddl" and record.position == Position(0x300, 0)
