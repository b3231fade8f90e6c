"""Which connection failures are the settings' fault (``source.refusals``)."""

from __future__ import annotations

import psycopg
import pytest

from cdc.capture.source.refusals import configuration_refusal

AT = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize(("message", "names"), [
    (AT + 'FATAL:  password authentication failed for user "cdc"', "password"),
    (AT + 'FATAL:  no pg_hba.conf entry for replication connection from host "127.0.0.1", '
          'user "cdc", no encryption', "pg_hba.conf"),
    (AT + 'FATAL:  certificate authentication failed for user "cdc_cert"', "sslcert"),
    (AT + "FATAL:  connection requires a valid client certificate", "sslcert"),
    (AT + "SSL error: certificate verify failed", "sslrootcert"),
    (AT + 'server certificate for "127.0.0.1" does not match host name "localhost"',
     "host name"),
    (AT + 'FATAL:  role "nobody" does not exist', "user"),
    (AT + 'FATAL:  database "nodb" does not exist', "dbname"),
])
def test_refusals_name_the_setting_to_fix(message: str, names: str) -> None:
    why = configuration_refusal(psycopg.OperationalError(message))
    assert why is not None and names in why, why


@pytest.mark.parametrize("message", [
    AT + "Connection refused\n\tIs the server running on that host?",
    AT + "FATAL:  the database system is starting up",
    AT + "FATAL:  terminating connection due to administrator command",
    AT + 'FATAL:  role "cdc" is not permitted to log in',  # a retry after ALTER ROLE works
    "server closed the connection unexpectedly",
])
def test_a_server_that_is_down_or_restarting_is_retried(message: str) -> None:
    assert configuration_refusal(psycopg.OperationalError(message)) is None


def test_only_connection_errors_are_refusals() -> None:
    error = psycopg.errors.InsufficientPrivilege("password authentication failed")
    assert configuration_refusal(error) is None
