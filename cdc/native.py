"""The optional native core (Rust, in ``native/``): its interface and the switch.

``make setup`` builds the module ``distributary_native`` into ``.venv``. Where it is
installed, the hot paths use it (the log's record codec, murmur2, the snapshot's COPY
rows into events, the stream's row changes into records); the Python functions beside
each use stay the readable reference, held byte for byte to the same results by
differential tests. ``DISTRIBUTARY_NATIVE=0`` uses the reference even when the module is
installed; a plain ``pip install distributary`` has no native module and uses it too.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

if TYPE_CHECKING:  # the log imports this module: no import of it at run time
    from .log.records import Message, Record

    RawLineBatch: TypeAlias = tuple[list[Message], int, int, bool, tuple[str, int] | None]
    """``decode_lines``: messages, end, next_offset, skipping, (reason, position) or None."""
    EncodedBatch: TypeAlias = tuple[bytes, list[tuple[int, int]], int]
    """``encode_batch``: the lines, the index entries ``(offset, byte)``, last indexed byte."""

SWITCH = "DISTRIBUTARY_NATIVE"
MODULE = "distributary_native"


class NativeCore(Protocol):
    """The functions ``distributary_native`` provides (see ``native/src/python/``)."""

    def encode_batch(self, records: Sequence[Record], first_offset: int, now_ms: int,
                     size: int, last_indexed: int, index_interval: int) -> EncodedBatch: ...

    def decode_lines(self, chunk: bytes, start: int, limit: int, topic: str, partition: int,
                     next_offset: int, skipping: bool) -> RawLineBatch: ...

    def murmur2(self, data: bytes) -> int: ...

    def crc32(self, data: bytes, value: int = 0) -> int: ...

    def partition_for(self, key: bytes, partitions: int) -> int: ...

    def group_records(self, records: list[Record], counts: dict[str, int]
                      ) -> dict[tuple[str, int], list[Record]] | None: ...


class SnapshotCore(Protocol):
    """The snapshot functions of ``distributary_native`` (``native/src/python/snapshot.rs``):
    a table's ``SnapshotPlan`` and ``snapshot_rows`` over a chunk of COPY text rows."""

    def SnapshotPlan(self, kinds: Sequence[int], names: Sequence[str],
                     key_indexes: Sequence[int], schema_version: int) -> object: ...

    def snapshot_rows(self, chunk: bytes, plan: object,
                      source: tuple[bytes, bytes] | None = None,
                      first_seq: int = 0) -> list[tuple[bytes, bytes] | bytes]: ...

    def snapshot_records(self, chunk: bytes, plan: object, topic: str, lsn: int,
                         source: tuple[bytes, bytes], first_seq: int
                         ) -> tuple[list[Record | None], list[tuple[int, bytes]]]: ...

    def CopyDrain(self, pgconn: int, get_copy_data: int, free_mem: int) -> object: ...


class DmlCore(SnapshotCore, Protocol):
    """The row change functions of ``distributary_native`` (``native/src/python/dml.rs``,
    ``spool.rs``): one pgoutput Insert, Update or Delete message into its event, record
    or stream spool frame (None when Python must convert it), with a ``SnapshotPlan`` of
    the relation; a chunk of spool frames into records."""

    def dml_event(self, payload: bytes, plan: object) -> tuple[bytes, bytes, bool] | None: ...

    def dml_record(self, payload: bytes, plan: object, topic: str, lsn: int, head: bytes,
                   commit_lsn: int, commit_lsn_text: bytes, tail: bytes,
                   seq: int) -> Record | None: ...

    def feed_batch(self, raw: list[memoryview], start: int,
                   tables: dict[int, tuple[object, str, bytes, bytes, bytes]],
                   open_: tuple[int, bytes, bytes, int] | None, stream: bool, begins: bool,
                   ready: list[Record]
                   ) -> tuple[int, bytes | None, tuple[int, int, int, int] | None,
                              tuple[int, int, int] | None, int, int]: ...

    def spool_frame(self, payload: bytes, plan: object, topic: bytes, source_names: bytes,
                    lsn: int) -> bytes | None: ...

    def spool_records(self, chunk: bytes, start: int, limit: int, max_bytes: int,
                      aborted: frozenset[int], db: bytes, commit_lsn: int,
                      commit_lsn_text: bytes, tail: bytes,
                      first_seq: int) -> tuple[list[Record], int, int, int]: ...


def import_core() -> NativeCore | None:
    """The native module when it is installed (whatever the switch says), else None."""
    try:
        return cast(NativeCore, importlib.import_module(MODULE))
    except ImportError:
        return None


def enabled() -> bool:
    """False when ``DISTRIBUTARY_NATIVE=0`` asks for the Python reference."""
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


CORE: NativeCore | None = import_core() if enabled() else None
"""The native core the hot paths use, or None: the Python reference is used."""


def snapshot_core() -> SnapshotCore | None:
    """The snapshot functions when the switch allows and the module is installed, else
    None."""
    core = CORE if enabled() else None
    return None if core is None else cast(SnapshotCore, core)


def dml_core() -> DmlCore | None:
    """The row change functions when the switch allows and the module is installed, else
    None."""
    core = snapshot_core()
    return None if core is None else cast(DmlCore, core)
