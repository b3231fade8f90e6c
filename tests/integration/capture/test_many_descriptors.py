"""The capture works when its sockets and files get descriptors numbered above 1023
(``select()`` cannot wait on those; the capture must never use it)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator

import pytest

from cdc.capture.runner import Capture

from .conftest import CaptureEnv

HELD = 1100


@pytest.fixture
def many_descriptors() -> Iterator[list[int]]:
    """1,100 open descriptors (the soft limit raised if it is lower), closed afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = HELD + 512
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"RLIMIT_NOFILE hard limit {hard} is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(HELD)]
    try:
        yield held
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_capture_streams_with_descriptors_above_1023(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture],
        many_descriptors: list[int]) -> None:
    assert max(many_descriptors) > 1023
    capture_env.sql("CREATE TABLE t (id int PRIMARY KEY, v text)")
    capture = run_capture()
    capture_env.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3) AS i",
                    "INSERT INTO t VALUES (4, 'v4'), (5, 'v5')")
    capture_env.sql("UPDATE t SET v = 'changed' WHERE id = 3")
    found = capture_env.wait_for("t", 6, timeout=30)
    assert [e["op"] for e in capture_env.values("t")] == ["c"] * 5 + ["u"]
    assert sorted(e["after"]["id"] for e in capture_env.values("t")) == [1, 2, 3, 3, 4, 5]
    assert len(found) == 6
    assert capture.stats.sessions == 1  # no reconnect: the stream never failed
