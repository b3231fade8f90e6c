"""PostgreSQL connection strings: checked with libpq's own parser, never echoed with a secret."""

from __future__ import annotations

import functools
import re

from psycopg import ProgrammingError, pq
from psycopg.conninfo import conninfo_to_dict

SECRET_KEYWORDS = frozenset({
    "password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key",
})
DSN_EXAMPLES = "'postgresql://user@host:5432/dbname' or 'host=... dbname=... user=...'"

_QUOTED = re.compile(r'"([^"]*)"')
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_FORBIDDEN_KEYWORDS = {"replication": "the capture sets replication=database itself"}


@functools.cache
def _conninfo_keywords() -> frozenset[str]:
    """The connection keywords libpq knows (``host``, ``port``, ``sslmode``, ...)."""
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _safe_libpq_reason(message: str) -> str:
    """libpq's parse error, keeping quoted keywords and punctuation, blanking the rest."""

    def keep_keywords(match: re.Match[str]) -> str:
        fragment = match.group(1)
        harmless = fragment in _conninfo_keywords() or re.fullmatch(r"[^A-Za-z0-9]", fragment)
        return match.group(0) if harmless else '"…"'

    first_line = message.strip().splitlines()[0] if message.strip() else "cannot parse"
    return _QUOTED.sub(keep_keywords, first_line)


def parse_dsn(dsn: str) -> dict[str, str]:
    """Parse a DSN into its keywords; ``ValueError`` whose message never contains a secret."""
    if not dsn.strip():
        raise ValueError(f"expected a PostgreSQL connection string like {DSN_EXAMPLES}")
    scheme = _URL_SCHEME.match(dsn.strip())
    if scheme is not None and scheme.group(1) not in ("postgresql", "postgres"):
        raise ValueError(f"expected a postgresql:// URL, got a {scheme.group(1)}:// URL")
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        raise ValueError(f"not a valid PostgreSQL connection string "
                         f"({_safe_libpq_reason(str(exc))}); expected {DSN_EXAMPLES}") from None
    result = {key: str(value) for key, value in params.items() if value is not None}
    for port in result.get("port", "").split(","):
        if port and not port.isdigit():
            raise ValueError(f"port {port!r} in the connection string is not a number")
    for keyword, reason in _FORBIDDEN_KEYWORDS.items():
        if keyword in result:
            raise ValueError(f"remove {keyword!r} from the connection string: {reason}")
    return result


def dsn_secrets(dsn: str) -> set[str]:
    """Every secret a DSN carries (its password and friends), for redaction."""
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError:
        return set(re.findall(r"password\s*=\s*'?([^'\s]+)", dsn))
    return {str(value) for key, value in params.items() if key in SECRET_KEYWORDS and value}


def mask_dsn(dsn: str) -> str:
    """The DSN as ``key=value`` pairs with every secret replaced by ``***``."""
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError:
        return "<unparsable connection string>"
    return " ".join(f"{key}={'***' if key in SECRET_KEYWORDS else value}"
                    for key, value in params.items())
