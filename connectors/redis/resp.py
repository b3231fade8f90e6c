"""Script calls packed into RESP by hand, sent in one write and read back in order.

redis-py's pipeline sends every argument through its generic encoder, which measured as
most of a batch's client time; the sink's calls all have one shape, so their bytes are
joined here directly. Replies come back in order on the same connection; an error reply
stays, as its exception, in its call's place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis import Redis
from redis.exceptions import ResponseError


def bulk_string(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def evalsha_head(sha: str, key_count: int, arg_count: int) -> bytes:
    """The first RESP bytes of an ``EVALSHA`` with that many keys and arguments; the
    keys' and arguments' bulk strings follow."""
    return b"*%d\r\n$7\r\nEVALSHA\r\n%s%s" % (
        3 + key_count + arg_count, bulk_string(sha.encode()), bulk_string(b"%d" % key_count))


def evalsha_command(sha: str, keys: Sequence[bytes], args: Sequence[bytes]) -> bytes:
    """The RESP bytes of ``EVALSHA sha len(keys) *keys *args``."""
    parts = [evalsha_head(sha, len(keys), len(args))]
    parts.extend(bulk_string(key) for key in keys)
    parts.extend(bulk_string(arg) for arg in args)
    return b"".join(parts)


def run_commands(client: Redis, commands: Sequence[bytes]) -> list[Any]:
    """Send ``commands`` in one write on one pooled connection; their replies in order
    (an error reply as its ``ResponseError``). A connection that failed midway is closed,
    so no unread reply is left for its next user."""
    pool = client.connection_pool
    connection: Any = pool.get_connection()  # redis-py leaves its methods untyped
    complete = False
    try:
        connection.send_packed_command([b"".join(commands)])
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
        complete = True
        return replies
    finally:
        if not complete:
            connection.disconnect()
        pool.release(connection)
