"""Which failures of the OpenSearch sink's first connection are configuration errors (the
integration tests in tests/integration/security/ meet the TLS ones on real handshakes;
OpenSearch's 401 needs its security plugin, which the launcher does not install)."""

from __future__ import annotations

from opensearchpy.exceptions import (
    AuthenticationException,
    AuthorizationException,
    ConnectionError,
    ConnectionTimeout,
    SSLError,
    TransportError,
)

from connectors.opensearch.errors import login_refusal


def test_a_refused_login_names_the_credentials() -> None:
    refused = login_refusal(AuthenticationException(401, "security_exception", {}))
    assert refused is not None
    field, why = refused
    assert field == "config.password"
    assert "config.username" in why and "refused the login" in why


def test_tls_failures_name_their_setting() -> None:
    verify = SSLError("N/A", "x", OSError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                                          "verify failed: unable to get local issuer"))
    plain = SSLError("N/A", "x", OSError("[SSL: WRONG_VERSION_NUMBER] wrong version number"))
    assert [refused and refused[0] for refused in map(login_refusal, (verify, plain))] == [
        "config.ca_certs", "config.hosts"]


def test_what_a_retry_may_fix_is_not_a_refusal() -> None:
    for exc in (ConnectionError("N/A", "refused", OSError("Connection refused")),
                ConnectionTimeout("TIMEOUT", "timed out", OSError("timed out")),
                TransportError(503, "unavailable", {}),
                AuthorizationException(403, "cluster_block_exception", {}),
                SSLError("N/A", "x", OSError("EOF occurred in violation of protocol"))):
        assert login_refusal(exc) is None, exc
