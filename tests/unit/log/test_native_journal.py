"""The journal's batch written as buffers (``batch_buffers``, ``os.writev``) against the
reference ``encode_batch``: the same bytes, whatever the parts; the native ``crc32``
against ``zlib.crc32``."""

from __future__ import annotations

import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.log.file.journal import Journal, batch_buffers, encode_batch, read_batches
from cdc.native import CORE

parts = st.lists(st.tuples(st.text(max_size=8).map(str.encode), st.integers(0, 2**32 - 1),
                           st.integers(0, 2**64 - 1), st.binary(max_size=300)), max_size=8)


@settings(max_examples=200, deadline=None)
@given(parts)
def test_the_buffers_are_the_encoded_batch(batch: list[tuple[bytes, int, int, bytes]]) -> None:
    assert b"".join(batch_buffers(batch)) == encode_batch(batch)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 2**32 - 1))
def test_the_native_crc32_is_zlibs(data: bytes, value: int) -> None:
    assert CORE.crc32(data, value) == zlib.crc32(data, value)
    assert CORE.crc32(data) == zlib.crc32(data)


def test_more_buffers_than_one_writev_takes(tmp_path: Path) -> None:
    batch = [(b"t%d" % i, i, i * 7, b"x" * i) for i in range(40)]
    log = tmp_path / "log"
    log.mkdir()
    writer = Journal(log, iov_max=3)
    writer.write(batch)
    writer.write(batch[:1])
    writer.close()
    assert writer.path.read_bytes() == encode_batch(batch) + encode_batch(batch[:1])
    found = [[(p.topic, p.partition, p.first_offset, p.data) for p in b.parts]
             for b in read_batches(log)]
    assert found == [[(t.decode(), p, o, d) for t, p, o, d in batch],
                     [(t.decode(), p, o, d) for t, p, o, d in batch[:1]]]
