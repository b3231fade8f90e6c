"""The security part of every Kafka client's configuration, from the ``log:`` section.

librdkafka's names: ``security.protocol``, ``sasl.mechanism``/``sasl.username``/
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``/``ssl.key.location``
/``ssl.key.password`` and ``ssl.endpoint.identification.algorithm`` (``https``: the
broker's certificate must name the host; ``none``: any certificate of a trusted CA).
Every client the backend creates (producers, consumers, readers, the admin) starts from
this; the result holds the password, so it is never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdc.config.event_log import LogConfig


def client_security(config: LogConfig) -> dict[str, str]:
    """librdkafka settings for ``config``'s ``security_protocol`` and its companions
    (empty for PLAINTEXT, librdkafka's default)."""
    protocol = config.security_protocol
    if protocol == "PLAINTEXT":
        return {}
    settings = {"security.protocol": protocol.lower()}
    if protocol.startswith("SASL_"):
        assert config.sasl_mechanism is not None and config.sasl_username is not None
        assert config.sasl_password is not None  # the config model requires them
        settings |= {"sasl.mechanism": config.sasl_mechanism,
                     "sasl.username": config.sasl_username,
                     "sasl.password": config.sasl_password.get_secret_value()}
    if protocol.endswith("SSL"):
        settings["ssl.endpoint.identification.algorithm"] = (
            "https" if config.ssl_verify_hostname else "none")
        files = {"ssl.ca.location": config.ssl_ca_location,
                 "ssl.certificate.location": config.ssl_certificate_location,
                 "ssl.key.location": config.ssl_key_location}
        settings |= {name: str(path) for name, path in files.items() if path is not None}
        if config.ssl_key_password is not None:
            settings["ssl.key.password"] = config.ssl_key_password.get_secret_value()
    return settings
