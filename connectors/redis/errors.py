"""How Redis's answers map onto the sink contract's errors.

    SinkError
    └── SinkUnavailableError  transient: no connection, timeout, loading, read-only
                              replica, out of memory, BUSY script, ACL refusal (an
                              operator fixes these), a cluster down or failing over,
                              a redirection not followed (the batch is retried, every
                              write being versioned)

Any other error reply to one command (``WRONGTYPE``: the key holds another type; a
value too large, ...) rejects that event only. Messages name the operation and the
error class (with the reply, or the host:port that failed), never the password.
"""

from __future__ import annotations

from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from connectors.contract import SinkUnavailableError

# a cluster script's key whose slot the node no longer holds (moved, or being migrated)
NOT_LOCAL = "Script attempted to access a non local key"
TRANSIENT_REPLIES = ("BUSY", "LOADING", "MISCONF", "MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN",
                     "TRYAGAIN", "OOM", "READONLY", "NOPERM", NOT_LOCAL,
                     "Script attempted to execute")  # ... a command while the cluster is down


def is_transient(exc: RedisError) -> bool:
    """True if the same command may succeed later."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | ReadOnlyError |
                  OutOfMemoryError | TryAgainError | NoPermissionError | ClusterError |
                  AskError):  # a cluster's redirections (MOVED too) left over, failovers
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(TRANSIENT_REPLIES)


def unavailable(exc: RedisError | RedisClusterException, doing: str) -> SinkUnavailableError:
    """A transient error for a command that failed while ``doing`` something."""
    detail = type(exc).__name__
    if isinstance(exc, ClusterError):  # redirections or TRYAGAIN replies ran out
        detail = (f"{detail}: {str(exc)[:200]}; a slot being migrated or a failover, "
                  "retried until the cluster settles")
    elif isinstance(exc, ResponseError | RedisConnectionError | RedisClusterException):
        detail = f"{detail}: {str(exc)[:200]}"  # a reply, or which host:port failed
    return SinkUnavailableError(f"Redis failed while {doing} ({detail})")


def login_refusal(exc: RedisError | RedisClusterException) -> str | None:
    """Why Redis (or TLS) refused the connector's login for a reason a retry cannot fix,
    with the setting to fix; None for anything else (down, loading, …)."""
    if isinstance(exc, AuthenticationError):
        return ("Redis refused the login (a wrong or missing password, or an ACL user "
                "that does not exist or is off): check config.password or the URL's user "
                "and password")
    if isinstance(exc, RedisConnectionError) and "certificate verify failed" in str(exc):
        return ("Redis's TLS certificate did not verify: check the CA the rediss:// URL "
                "trusts (ssl_ca_certs) and that the certificate has not expired")
    return None


def rejection_reason(exc: RedisError) -> str:
    """Why Redis refused one event's command."""
    reason = f"Redis refused the write: {str(exc)[:500]}"
    if "invalid bulk length" in str(exc):
        reason += " (the value is larger than this Redis accepts (proto-max-bulk-len))"
    return reason
