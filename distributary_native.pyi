# The types of the native module `distributary_native`: every function and class that
# native/src/python/mod.rs registers, with the names, defaults and types of the Rust
# signatures in native/src/python/*.rs. maturin finds it here, at the project's root, and
# ships it in the wheel as the module's `__init__.pyi`, with a `py.typed` marker;
# tests/unit/architecture/test_native_stub.py holds it to the built module (names,
# parameters, defaults).

from collections.abc import Callable, Sequence, Set
from typing import BinaryIO, final

from cdc.log.records import Message, Position, Record
from cdc.plugins.contract import SinkEvent

VALUE_KINDS: dict[str, int]
"""The name of each codec (in ``cdc.capture.codecs``) the native core reproduces → the code a
``SnapshotPlan`` takes for it (``convert/values.rs``)."""
ARRAY_OF: int
"""A kind's code with this bit: an array of that kind (``array_codec`` with ``,``)."""
RANGE_OF: int
"""A kind's code with this bit: a range of that kind (``range_codec``)."""
PATH_SEPARATOR: str
"""What joins the names of a path in ``opensearch_actions``' ``deep`` kinds."""
FIELD_KINDS: dict[str, int]
"""A JSON value's kind (``str``, ``int``, ``big_int``, ``float``, ``bool``, ``object``,
``array``, ``null``) → its bit in ``opensearch_actions``' fields (``opensearch.rs``)."""

# log records (encode.rs, decode.rs, group.rs, partition.rs)

def encode_batch(
    records: Sequence[Record], first_offset: int, now_ms: int, size: int, last_indexed: int,
    index_interval: int,
) -> tuple[bytes, list[tuple[int, int]], int]:
    """``(lines, index_entries, last_indexed)``, as ``encode_batch_reference``
    (``tests/reference/log_codec.py``)."""

def encode_topic_batch(
    records: list[Record], topic: str, first_offset: int, now_ms: int, size: int,
    last_indexed: int, index_interval: int,
) -> tuple[bytes, bytes, int] | None:
    """``(lines, packed index entries, last_indexed)``, None: the producer groups them."""

def decode_lines(
    chunk: bytes, start: int, limit: int, topic: str, partition: int, next_offset: int,
    skipping: bool,
) -> tuple[list[Message], int, int, bool, tuple[str, int] | None]:
    """``(messages, end, next_offset, skipping, (reason, position) or None)``."""

def murmur2(data: bytes | bytearray) -> int: ...
def partition_for(key: bytes | bytearray, partitions: int) -> int: ...
def crc32(data: bytes, value: int = 0) -> int: ...
def group_records(
    records: list[Record], counts: dict[str, int]
) -> dict[tuple[str, int], list[Record]] | None: ...

# snapshot (snapshot.rs, copy_drain.rs)

@final
class SnapshotPlan:
    """One table's conversion: its columns' kinds and names, its key columns."""

    def __init__(
        self, kinds: Sequence[int], names: Sequence[str], key_indexes: Sequence[int],
        schema_version: int,
    ) -> None: ...

def snapshot_rows(
    chunk: bytes, plan: SnapshotPlan, source: tuple[bytes, bytes] | None = None,
    first_seq: int = 0,
) -> list[tuple[bytes, bytes] | bytes]:
    """Per row ``(key, value)``, or its raw line when Python must convert it."""

@final
class SnapshotBatch:
    """A chunk's rows converted, grouped and encoded natively (made by ``snapshot_batch``;
    it has no constructor): ``cdc.log.file.encoded.EncodedRows``."""

    @property
    def topic(self) -> str: ...
    @property
    def lsn(self) -> int: ...
    @property
    def first_seq(self) -> int: ...
    def __len__(self) -> int: ...
    def extend(
        self, chunk: bytes, plan: SnapshotPlan, source: tuple[bytes, bytes], first_seq: int
    ) -> list[tuple[int, bytes]]: ...
    def fill(self, index: int, key: bytes, value: bytes) -> None: ...
    def records(self) -> list[Record]:
        """Each row's record (a ``ValueError`` while a row is not filled)."""

    def parts(self, partitions: int) -> list[SnapshotPart]:
        """One part per partition, in order of first appearance."""

@final
class SnapshotPart:
    """One partition's rows of a ``SnapshotBatch``: ``cdc.log.file.encoded.EncodedPart``."""

    @property
    def partition(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def last_position(self) -> Position: ...
    def encode(
        self, first_offset: int, now_ms: int, size: int, last_indexed: int, index_interval: int
    ) -> tuple[bytes, list[tuple[int, int]], int]:
        """As ``encode_batch`` of the part's records."""

def snapshot_batch(
    chunk: bytes, plan: SnapshotPlan, topic: str, lsn: int, source: tuple[bytes, bytes],
    first_seq: int,
) -> tuple[SnapshotBatch, list[tuple[int, bytes]]]: ...
def after_lines(data: bytes, count: int) -> int: ...

@final
class CopyDrain:
    """A COPY OUT's rows drained from libpq: ``pgconn`` is psycopg's ``PGconn``,
    ``version`` ``psycopg.pq.version()``, which the one libpq loaded in this process must
    have (``TypeError``/``ValueError`` when they do not fit, or no single libpq is loaded)."""

    MORE: int
    """``drain``'s state: a chunk is ready, call again."""
    WAIT: int
    """Wait for the socket and consume input first, then call again."""
    DONE: int
    """The COPY ended (the last lines are in the chunk)."""
    FAILED: int
    """libpq failed (its error message says why)."""

    def __init__(self, pgconn: object, version: int) -> None: ...
    def drain(self, chunk_bytes: int) -> tuple[int, bytes | None]:
        """``(state, chunk)``: ``MORE``, ``WAIT``, ``DONE`` or ``FAILED``."""

# streaming replication (dml.rs, spool.rs, batch.rs)

def dml_event(payload: bytes, plan: SnapshotPlan) -> tuple[bytes, bytes, bool] | None:
    """``(key, body, tombstone)``, None: Python converts it."""

def spool_records(
    file: BinaryIO | None, leftover: bytes, ready: list[Record], limit: int, max_bytes: int,
    aborted: Set[int], commit: tuple[bytes, int, bytes, bytes], first_seq: int,
    chunk_bytes: int,
) -> tuple[bytes, int, bool]:
    """``(leftover, next_seq, done)``; the records are appended to ``ready``."""

class BatchTables:
    """Relation OID → its conversion (or None: Python's), kept between ``feed_batch``
    calls."""

    def __init__(self) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

def feed_batch(
    raw: list[memoryview] | list[bytes], start: int,
    tables: BatchTables,
    learn: Callable[[int], tuple[SnapshotPlan, str, bytes, bytes, bytes] | None],
    open: tuple[int, bytes, bytes, int] | None, stream: bool, begins: bool,
    ready: list[Record],
) -> tuple[int, bytes | None, tuple[int, int, int, int] | None, tuple[int, int, int] | None,
           int, int]:
    """``(index, frames, commit, begin, seq, lsn)``; ``learn(oid)``: ``(plan, topic, head,
    topic UTF-8, source names)`` of a relation ``tables`` does not hold yet; ``open``:
    ``(commit_lsn, commit_lsn_text, tail, seq)`` of the transaction open before."""

# sinks (redis_args.rs, opensearch.rs)

def redis_calls(
    events: list[SinkEvent],
    tables: dict[tuple[str, str, str], tuple[list[tuple[str, str]], str, str] | None],
    version_prefix: str, max_value_bytes: int, chunk_rows: int, chunk_bytes: int,
) -> tuple[tuple[list[str], list[tuple[int, int, bytes, int, bytes]]] | None,
           tuple[str, str, str] | None]:
    """``((markers, calls), None)``, ``(None, missing table)`` or ``(None, None)``;
    ``tables``: ``(topic, schema, table)`` → ``(pieces, tail, marker)`` or None."""

def sink_event_checks(messages: list[Message]) -> tuple[list[int], list[int]] | None:
    """``(versions, doubtful indexes)``, None: Python checks them all."""

def join_loaded_rows(events: list[SinkEvent]) -> list[tuple[str, str, bytes, bytes] | None]:
    """Per event ``(schema, table, key, row)`` for a snapshot read (``key`` as
    ``connectors.joins.store.key_bytes`` stores it, ``row`` ``orjson.dumps(after)``), or
    None: applied in Python (``joins.rs``)."""

def opensearch_actions(
    events: list[SinkEvent], tables: dict[tuple[str, str, str], str | None],
    max_id_bytes: int,
) -> tuple[tuple[list[bytes], list[str], list[int], list[tuple[str, str, str]],
                 list[dict[str, int]], list[dict[str, int] | None]] | None,
           tuple[str, str, str] | None]:
    """``((payloads, kinds, table_of, tables, fields, deep), None)``, ``(None, missing
    table)`` or ``(None, None)``; ``tables``: ``(topic, schema, table)`` → alias or None;
    ``deep``: per table every value's path (names joined by ``PATH_SEPARATOR``) → its
    kinds, or None."""
