"""``DeadlineCommitter``: a commit the coordinator does not answer gives up waiting after
its deadline; commits run one at a time, in order; a commit's own error reaches the
caller."""

from __future__ import annotations

import threading

import pytest

from cdc.errors import TransientError
from cdc.log.kafka.commits import DeadlineCommitter, KafkaCommitTimeoutError


class Coordinator:
    """A commit function that records what it committed and blocks while ``down``."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.up.set()
        self.committed: list[int] = []

    def commit(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"refused offset {offset}")
        self.up.wait()
        self.committed.append(offset)


def test_a_commit_answered_in_time_returns() -> None:
    coordinator = Coordinator()
    committer = DeadlineCommitter(coordinator.commit, "test-commit")
    committer(10, timeout_s=5.0)
    committer(20, timeout_s=5.0)
    assert coordinator.committed == [10, 20]
    committer.close()


def test_an_unanswered_commit_gives_up_and_later_ones_keep_their_order() -> None:
    coordinator = Coordinator()
    committer = DeadlineCommitter(coordinator.commit, "test-commit")
    coordinator.up.clear()  # every broker gone
    with pytest.raises(KafkaCommitTimeoutError, match=r"within 0\.1 s") as raised:
        committer(10, timeout_s=0.1)
    assert isinstance(raised.value, TransientError)
    with pytest.raises(KafkaCommitTimeoutError):
        committer(20, timeout_s=0.1)  # queued behind the first: never overtakes it
    assert coordinator.committed == []
    coordinator.up.set()  # back: the queued commits end in order, then a new one
    committer(30, timeout_s=5.0)
    assert coordinator.committed == [10, 20, 30]
    committer.close()


def test_a_commit_error_reaches_the_caller() -> None:
    committer = DeadlineCommitter(Coordinator().commit, "test-commit")
    with pytest.raises(ValueError, match="refused offset -1"):
        committer(-1, timeout_s=5.0)
    committer.close()
