"""Spark's Kafka source options for the ``log:`` section's security settings.

The Java client's names, prefixed ``kafka.``: ``security.protocol``, ``sasl.mechanism``
and a ``sasl.jaas.config`` (``PlainLoginModule`` or ``ScramLoginModule`` with the user
and password), a PEM truststore (``ssl.truststore.type=PEM``, ``ssl.truststore.location``)
and, for a client certificate, a PEM keystore given inline. The options hold the
password: they are passed to the reader, never logged.
"""

from __future__ import annotations

from cdc.config.event_log import LogConfig

_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kafka_security_options(config: LogConfig) -> dict[str, str]:
    """``kafka.*`` reader options for ``config``'s security settings (empty for
    PLAINTEXT)."""
    protocol = config.security_protocol
    if protocol == "PLAINTEXT":
        return {}
    options: dict[str, str] = {"kafka.security.protocol": protocol}
    if protocol.startswith("SASL_"):
        assert config.sasl_mechanism is not None and config.sasl_username is not None
        assert config.sasl_password is not None  # the config model requires them
        options["kafka.sasl.mechanism"] = config.sasl_mechanism
        options["kafka.sasl.jaas.config"] = (
            f"{_LOGIN_MODULES[config.sasl_mechanism]} required "
            f"username={_jaas_quoted(config.sasl_username)} "
            f"password={_jaas_quoted(config.sasl_password.get_secret_value())};")
    if protocol.endswith("SSL"):
        if config.ssl_ca_location is not None:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = str(config.ssl_ca_location)
        if not config.ssl_verify_hostname:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
        if config.ssl_certificate_location is not None and config.ssl_key_location is not None:
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = (
                config.ssl_certificate_location.read_text())
            options["kafka.ssl.keystore.key"] = config.ssl_key_location.read_text()
            if config.ssl_key_password is not None:
                options["kafka.ssl.key.password"] = config.ssl_key_password.get_secret_value()
    return options
