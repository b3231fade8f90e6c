"""The first contact with Kafka: a refusal no retry can fix is a configuration error.

Before a process has reached the cluster once, a login Kafka refuses (a wrong SASL user
or password, a mechanism the listener does not offer), a broker certificate that does not
verify (another CA, another host name) or a listener that speaks another protocol (TLS
to a plaintext listener, or the reverse) stops it with a ``ConfigError`` naming the
``log.*`` setting to fix. A cluster that does not answer is no error here: the clients
retry it as any outage, and so is every refusal after this first contact (a password
rotated mid-run). Messages come from librdkafka's errors and logs, which never hold the
password.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from cdc.errors import ConfigError, ConfigProblem

PROBE_S = 15.0
"""How long the first contact waits for an answer before leaving it to the clients."""
_UNREACHABLE = ("Connection refused", "Failed to resolve", "No route to host")
_PLAINTEXT_AT_TLS = "in state APIVERSION_QUERY"  # the broker hung up on a cleartext hello
_WRONG_HOST = ("presented a certificate of a trusted CA that does not name the host "
               "connected to: give log.bootstrap_servers by a name (or IP address) the "
               "certificate holds, or set ssl_verify_hostname: false")


class _Reports:
    """What one librdkafka client reported: its errors (``error_cb``) and log lines."""

    def __init__(self) -> None:
        self.errors: list[tuple[int, str]] = []
        self.lines: list[str] = []

    def error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb``."""
        self.errors.append((error.code(), error.str()))

    def log(self, level: int, message: str, *args: object) -> None:
        """librdkafka's ``logger`` (a ``logging.Logger``-like ``log``)."""
        self.lines.append(message % args if args else message)


def refusal(code: int, text: str, config: dict[str, Any]) -> tuple[str, str] | None:
    """The setting to fix and why, when an error librdkafka reported is a refusal no
    retry can fix; None for anything else (a broker down, a timeout)."""
    if code == KafkaError._AUTHENTICATION:
        if "supported mechanisms" in text:
            offered = text.split("supported mechanisms:", 1)[1].split("(")[0].strip()
            if not offered:
                return "log.security_protocol", (
                    "offers no SASL login on this listener: set security_protocol to what "
                    "the listener speaks (PLAINTEXT or SSL) and drop the sasl_* settings")
            return "log.sasl_mechanism", (
                f"does not offer SASL {config.get('sasl.mechanism')} (it offers {offered}): "
                "set sasl_mechanism to one of those")
        return "log.sasl_password", (
            f"refused the login (user {config.get('sasl.username')!r}, "
            f"{config.get('sasl.mechanism')}: a wrong password, or no such user for this "
            "mechanism; check log.sasl_username, log.sasl_password and log.sasl_mechanism)")
    if "connecting to a PLAINTEXT broker listener" in text:
        return "log.security_protocol", (
            f"does not speak TLS on this listener, but security_protocol is "
            f"{str(config.get('security.protocol')).upper()}: set it to PLAINTEXT or "
            "SASL_PLAINTEXT, as the listener is")
    if code == KafkaError._SSL or "SSL handshake failed" in text:
        reason = text.split("SSL handshake failed:", 1)[-1].split("(after")[0].strip()
        if "certificate verify failed" not in text:
            return "log.ssl_certificate_location", (
                f"refused the TLS handshake ({reason[:160]}): a broker that requires a "
                "client certificate needs ssl_certificate_location and ssl_key_location")
        return "log.ssl_ca_location", (
            f"presented a certificate that did not verify ({reason[:160]}): set "
            "ssl_ca_location to the PEM file of the CA that signed the brokers' certificates")
    return None


def _protocol_mismatch(lines: list[str], config: dict[str, Any]) -> tuple[str, str] | None:
    """A cleartext client whose every attempt the broker closed at its first request:
    the listener expects TLS."""
    protocol = str(config.get("security.protocol", "plaintext")).upper()
    if protocol.endswith("SSL") or sum(_PLAINTEXT_AT_TLS in line for line in lines) < 2:
        return None
    return "log.security_protocol", (
        f"closed every {protocol} connection at its first request (the listener expects "
        "TLS?): set security_protocol to SSL or SASL_SSL, as the listener is, with "
        "ssl_ca_location")


def check_access(config: dict[str, Any], servers: str, *, for_s: float = PROBE_S) -> bool:
    """Reach the cluster once (one metadata request) with the clients' ``config``; raise
    ``ConfigError`` for a refusal no retry can fix. True once reached; False when it did
    not answer within ``for_s`` or refused connections (left to the clients' retries)."""
    found = _first_contact(config, for_s)
    if isinstance(found, tuple) and found[0] == "log.ssl_ca_location" and config.get(
            "ssl.endpoint.identification.algorithm") == "https":
        # librdkafka says the same for another CA and another host: tell them apart
        unchecked = {**config, "ssl.endpoint.identification.algorithm": "none"}
        again = _first_contact(unchecked, min(for_s, 5.0))
        if not (isinstance(again, tuple) and again[0] == "log.ssl_ca_location"):
            found = ("log.ssl_verify_hostname", _WRONG_HOST)
    if isinstance(found, tuple):  # the probe's client is gone by now: it retries nothing
        raise ConfigError([ConfigProblem(found[0], f"Kafka at {servers} {found[1]}")])
    return found


def _first_contact(config: dict[str, Any], for_s: float) -> bool | tuple[str, str]:
    """True once reached, False if not answering, else the refusal (setting, why)."""
    reports = _Reports()
    settings: dict[str, Any] = {**config, "error_cb": reports.error, "logger": reports}
    admin: Any = AdminClient(settings)
    deadline = time.monotonic() + for_s
    while True:
        try:
            admin.list_topics(timeout=1.0)
            return True
        except KafkaException:
            pass
        admin.poll(0.05)  # serves error_cb and the log lines
        found = next((why for code, text in reports.errors
                      if (why := refusal(code, text, config)) is not None), None)
        found = found or _protocol_mismatch(reports.lines, config)
        if found is not None:
            return found
        if time.monotonic() > deadline or any(
                marker in text for _, text in reports.errors for marker in _UNREACHABLE):
            return False
