"""How Redis's errors read once they are the sink's: transient ones name their cause."""

from __future__ import annotations

from redis.exceptions import ClusterError, ConnectionError, ResponseError, TryAgainError

from connectors.redis.errors import is_transient, unavailable


def test_redirections_run_out_name_the_cluster_and_are_retried() -> None:
    exc = ClusterError("TTL exhausted.")
    assert is_transient(exc)
    message = str(unavailable(exc, "writing 6 rows"))
    assert message.startswith("Redis failed while writing 6 rows (ClusterError: TTL exhausted.")
    assert "slot being migrated" in message


def test_replies_and_hosts_are_named() -> None:
    assert "TRYAGAIN" in str(unavailable(ResponseError("TRYAGAIN Multiple keys"), "writing"))
    assert "127.0.0.1:7000" in str(unavailable(ConnectionError("127.0.0.1:7000 refused"),
                                               "writing"))
    assert is_transient(TryAgainError("TRYAGAIN"))
    assert not is_transient(ResponseError("WRONGTYPE Operation against a key"))
