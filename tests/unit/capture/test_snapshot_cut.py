"""Where a snapshot batch is cut inside a chunk of COPY lines: the native ``after_lines``
against the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.native import CORE
from tests.reference.copy_lines import after_lines_reference


@pytest.mark.parametrize(("data", "count", "end"), [
    (b"a\nbb\nccc\n", 0, 0), (b"a\nbb\nccc\n", 1, 2), (b"a\nbb\nccc\n", 2, 5),
    (b"a\nbb\nccc\n", 3, 9), (b"a\nbb\nccc\n", 4, 9), (b"", 1, 0), (b"\n\n", 2, 2),
])
def test_the_reference(data: bytes, count: int, end: int) -> None:
    assert after_lines_reference(data, count) == end


@given(st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=50),
       st.integers(0, 60), st.booleans())
def test_native_is_the_reference(lines: list[bytes], count: int, torn: bool) -> None:
    data = b"".join(line + b"\n" for line in lines) + (b"rest" if torn else b"")
    assert CORE.after_lines(data, count) == after_lines_reference(data, count)
