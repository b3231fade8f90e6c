"""How OpenSearch's answers map onto the sink contract's errors.

    SinkError
    ├── SinkUnavailableError  transient: no connection, timeout, HTTP 429/5xx, 401/403
    │                          (credentials or a cluster block an operator fixes),
    │                          es_rejected_execution, an alias gone under us
    └── SinkRejectedError     terminal: an index occupies the alias name

Per bulk item: 2xx, 409 (a newer version is stored: the write is stale, nothing to do)
and 404 of a delete (nothing to delete; the tombstone still records the version) are
success; 429/5xx/403 and a missing alias retry the whole batch (every write is
versioned, so retrying what succeeded is harmless); other 4xx (400 mapping and parse
errors, ...) reject that one event. Messages name the operation and the server's reason,
never credentials or URLs.
"""

from __future__ import annotations

from enum import Enum

from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import SSLError, TransportError

from connectors.contract import SinkRejectedError, SinkUnavailableError

RETRY_STATUSES = frozenset({401, 403, 408, 429})
RETRY_ERROR_TYPES = frozenset({"es_rejected_execution_exception",
                               "opensearch_rejected_execution_exception",
                               "cluster_block_exception", "index_not_found_exception",
                               "circuit_breaking_exception", "unavailable_shards_exception"})


class ItemOutcome(Enum):
    """What one bulk item's answer means."""

    DONE = "done"
    RETRY = "retry"
    REJECT = "reject"


def item_outcome(action: str, status: int, error_type: str | None) -> ItemOutcome:
    """The outcome of one bulk item (``action`` is ``index`` or ``delete``)."""
    if status < 300 or status == 409 or (status == 404 and action == "delete"):
        return ItemOutcome.DONE
    if status >= 500 or status in RETRY_STATUSES or error_type in RETRY_ERROR_TYPES:
        return ItemOutcome.RETRY
    return ItemOutcome.REJECT


def status_of(exc: TransportError) -> int | None:
    """The HTTP status of a failed request (``None`` when there was no answer)."""
    status = exc.status_code
    return status if isinstance(status, int) else None


def error_type_of(exc: TransportError) -> str | None:
    """The server's error type (``resource_already_exists_exception``, …) if it sent one."""
    info = exc.info
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
    return exc.error if isinstance(exc.error, str) else None


def unavailable(exc: TransportError, doing: str) -> SinkUnavailableError:
    """A transient error for a request that failed while ``doing`` something."""
    if isinstance(exc, OpenSearchConnectionError):
        return SinkUnavailableError(f"OpenSearch did not answer while {doing} "
                                    f"({type(exc).__name__})")
    return SinkUnavailableError(f"OpenSearch failed while {doing}: HTTP {exc.status_code} "
                                f"{error_type_of(exc) or ''}".rstrip())


def is_transient(exc: TransportError) -> bool:
    """True if retrying the request later may succeed."""
    status = status_of(exc)
    return (status is None or status >= 500 or status in RETRY_STATUSES
            or error_type_of(exc) in RETRY_ERROR_TYPES)


def translate(exc: TransportError, doing: str) -> SinkUnavailableError | SinkRejectedError:
    """The contract's error for a failed request (transient unless the server refused it)."""
    if is_transient(exc):
        return unavailable(exc, doing)
    return SinkRejectedError(f"OpenSearch refused {doing}: HTTP {exc.status_code} "
                             f"{error_type_of(exc) or ''}: {_reason(exc)}")


# what OpenSSL says of an answer to its TLS hello that is not TLS (plain HTTP)
PLAIN_HTTP_ANSWERS = ("wrong version number", "record layer failure", "packet length too long")


def login_refusal(exc: TransportError) -> tuple[str, str] | None:
    """``(setting, why)`` when OpenSearch (or TLS) refused the connector for a reason a
    retry cannot fix: a certificate that does not verify, TLS to a server that speaks
    plain HTTP, a refused login; None for anything else (down, busy, …)."""
    text = str(exc).lower()
    if isinstance(exc, SSLError) and "certificate verify failed" in text:
        return ("config.ca_certs", "OpenSearch's TLS certificate did not verify: check the CA "
                "the connector trusts (config.ca_certs), that the certificate names the host "
                "of config.hosts, and that it has not expired")
    if isinstance(exc, SSLError) and any(  # OpenSSL 3.0's words, then 3.2's
            words in text for words in PLAIN_HTTP_ANSWERS):
        return ("config.hosts", "the server did not answer TLS (an https:// host that speaks "
                "plain HTTP?): check the scheme of config.hosts")
    if status_of(exc) == 401:
        return ("config.password", "OpenSearch refused the login (a wrong or missing "
                "username or password): check config.username and config.password")
    return None


def _reason(exc: TransportError) -> str:
    info = exc.info
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        return str(info["error"].get("reason", ""))[:500]
    return ""
