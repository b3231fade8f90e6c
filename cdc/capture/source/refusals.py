"""Connection failures that retrying cannot fix: PostgreSQL (or libpq, for TLS) refusing
the capture's settings rather than being down.

A wrong password, a missing ``pg_hba.conf`` entry, a client certificate the server does
not accept, a server certificate that does not verify (another CA, expired, issued for
another host name), a role or database that does not exist: at start-up the capture
stops on these with one line naming ``source.dsn`` and the fix (exit status 2), instead
of backing off forever as if the server were down. Once it has streamed, the same error
is retried like any other (a password rotated mid-run may come back).

The server words its refusals in its ``lc_messages`` language and sends no SQLSTATE
before a session exists; the English texts are recognized, any other wording is retried.
"""

from __future__ import annotations

import psycopg

# (what the message says, lowercased) → why, and what to fix
_REFUSALS: tuple[tuple[str, str], ...] = (
    ("password authentication failed",
     "the server refused the password: check the user and the password "
     "(source.password_file, PGPASSWORD or the dsn's password)"),
    ("no pg_hba.conf entry",
     "the server's pg_hba.conf has no entry for this host, user and database "
     "(replication connections need one of their own)"),
    ("certificate authentication failed",
     "the server refused the client certificate: check sslcert and sslkey"),
    ("connection requires a valid client certificate",
     "the server wants a client certificate: set sslcert and sslkey"),
    ("certificate verify failed",
     "the server's certificate did not verify: check sslrootcert (the CA that issued "
     "it) and that the certificate has not expired"),
    ("does not match host name",
     "the server's certificate is for another host name: connect by the name it was "
     "issued for, or fix the certificate"),
    ("role \"", "the role does not exist: check the dsn's user"),
    ("database \"", "the database does not exist: check the dsn's dbname"),
)


def configuration_refusal(error: BaseException) -> str | None:
    """Why the server refused the connection for a reason a retry cannot fix, with the
    fix; None for any other error (down, unreachable, restarting, …)."""
    if not isinstance(error, psycopg.OperationalError):
        return None
    text = str(error).lower()
    for needle, why in _REFUSALS:
        if needle in text and (not needle.endswith('"') or "does not exist" in text):
            return why
    return None
