"""Where a snapshot batch is cut inside a chunk of COPY lines: the native ``after_lines``
against the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.snapshot.read import after_lines_reference
from cdc.native import snapshot_core

core = snapshot_core()
native = getattr(core, "after_lines", None)
needs_native = pytest.mark.skipif(
    native is None, reason="the native core is not installed or predates after_lines")


@pytest.mark.parametrize(("data", "count", "end"), [
    (b"a\nbb\nccc\n", 0, 0), (b"a\nbb\nccc\n", 1, 2), (b"a\nbb\nccc\n", 2, 5),
    (b"a\nbb\nccc\n", 3, 9), (b"a\nbb\nccc\n", 4, 9), (b"", 1, 0), (b"\n\n", 2, 2),
])
def test_the_reference(data: bytes, count: int, end: int) -> None:
    assert after_lines_reference(data, count) == end


@needs_native
@given(st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=50),
       st.integers(0, 60), st.booleans())
def test_native_is_the_reference(lines: list[bytes], count: int, torn: bool) -> None:
    data = b"".join(line + b"\n" for line in lines) + (b"rest" if torn else b"")
    assert native is not None
    assert native(data, count) == after_lines_reference(data, count)
