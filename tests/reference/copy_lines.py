"""The readable definition of ``after_lines``, which the native core computes."""

from __future__ import annotations


def after_lines_reference(data: bytes, count: int) -> int:
    """Where the first ``count`` lines of ``data`` end (after the newline of the last), or
    ``len(data)`` when it holds fewer."""
    find = data.find
    at = -1
    for _ in range(count):
        at = find(b"\n", at + 1)
        if at < 0:
            return len(data)
    return at + 1
