"""How ``KafkaServer`` serves its client listener: PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL, with PLAIN and SCRAM users and a PEM certificate.

The client listener gets its own name (``CLIENT``); brokers and the controller keep
talking PLAINTEXT on loopback (``BROKER``, ``CONTROLLER``), and the launcher's readiness
check uses the ``BROKER`` listener, so it needs no credentials. SCRAM users are written
into the metadata log when the storage is formatted (``--add-scram``), as KRaft wants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _jaas_quoted(value: str) -> str:
    """``value`` as a JAAS option value (double quotes; backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class ListenerSecurity:
    """The client listener's protocol; ``plain_users``/``scram_users`` (name → password)
    for SASL; ``certificate`` and ``key`` (PEM files, the key unencrypted PKCS#8) for TLS;
    ``client_ca`` (a PEM CA file) makes the listener require client certificates;
    ``reauthenticate_ms`` makes SASL clients log in again that often (a credential changed
    then reaches connections already open)."""

    protocol: str = "PLAINTEXT"
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_users: Mapping[str, str] = field(default_factory=dict)
    certificate: Path | None = None
    key: Path | None = None
    client_ca: Path | None = None
    reauthenticate_ms: int | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r}: expected one of {PROTOCOLS}")
        sasl, tls = self.protocol.startswith("SASL_"), self.protocol.endswith("SSL")
        if sasl and not (self.plain_users or self.scram_users):
            raise ValueError(f"{self.protocol} needs plain_users or scram_users")
        if tls and (self.certificate is None or self.key is None):
            raise ValueError(f"{self.protocol} needs certificate and key")

    @property
    def plaintext(self) -> bool:
        """True when the client listener is plain PLAINTEXT (the launcher's default)."""
        return self.protocol == "PLAINTEXT"

    @property
    def mechanisms(self) -> list[str]:
        """The SASL mechanisms the listener enables."""
        if not self.protocol.startswith("SASL_"):
            return []
        return (["PLAIN"] if self.plain_users else []) + (
            list(SCRAM_MECHANISMS) if self.scram_users else [])

    def listener_properties(self, listener: str, workdir: Path) -> dict[str, object]:
        """``listener.name.<listener>.*`` settings (the PEM keystore is written to
        ``workdir``)."""
        prefix = f"listener.name.{listener.lower()}."
        settings: dict[str, object] = {}
        if self.mechanisms:
            settings[prefix + "sasl.enabled.mechanisms"] = ",".join(self.mechanisms)
        if self.plain_users:
            users = " ".join(f"user_{name}={_jaas_quoted(password)}"
                             for name, password in self.plain_users.items())
            settings[prefix + "plain.sasl.jaas.config"] = f"{_PLAIN_MODULE} required {users};"
        for mechanism in self.mechanisms:
            if mechanism.startswith("SCRAM"):
                settings[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = (
                    f"{_SCRAM_MODULE} required;")
        if self.mechanisms and self.reauthenticate_ms is not None:
            settings["connections.max.reauth.ms"] = self.reauthenticate_ms
        if self.protocol.endswith("SSL"):
            assert self.certificate is not None and self.key is not None
            keystore = workdir / "client-listener.pem"
            keystore.write_text(self.key.read_text() + self.certificate.read_text())
            keystore.chmod(0o600)
            settings[prefix + "ssl.keystore.type"] = "PEM"
            settings[prefix + "ssl.keystore.location"] = keystore
            if self.client_ca is not None:
                settings[prefix + "ssl.truststore.type"] = "PEM"
                settings[prefix + "ssl.truststore.location"] = self.client_ca
                settings[prefix + "ssl.client.auth"] = "required"
        return settings

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that create the SCRAM users (both hashes)."""
        arguments: list[str] = []
        if not self.protocol.startswith("SASL_"):
            return arguments
        for name, password in self.scram_users.items():
            for mechanism in SCRAM_MECHANISMS:
                if set(name + password) & set(',[]="'):
                    raise ValueError("a SCRAM user's name and password may not hold , [ ] = \"")
                arguments += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        return arguments
