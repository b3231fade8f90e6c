"""The ``log:`` section: where events are kept (file or Kafka) and for how long."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, model_validator

from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.fields import DataSize, Duration, RetentionSize, RetentionTime, TopicName

_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}")


def _split_servers(value: object) -> object:
    return [part.strip() for part in value.split(",")] if isinstance(value, str) else value


def _host_port(value: str) -> str:
    if not _HOST_PORT.fullmatch(value):
        raise ValueError("expected 'host:port'")
    return value


def _non_empty_path(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        raise ValueError("expected a directory path")
    return value


BootstrapServer = Annotated[str, AfterValidator(_host_port)]

SESSION_TIMEOUT_BOUNDS = (timedelta(seconds=6), timedelta(minutes=30))
"""A Kafka broker's default ``group.min.session.timeout.ms`` and ``group.max.…``: a member
asking for a session outside them is refused when it joins."""


def _session_timeout(value: timedelta) -> timedelta:
    low, high = SESSION_TIMEOUT_BOUNDS
    if not low <= value <= high:
        raise ValueError("expected 6s to 30m (a Kafka broker refuses a group member's "
                         "session outside its group.min/max.session.timeout.ms, by default "
                         "those bounds)")
    return value


LocalPath = Annotated[Path, BeforeValidator(_non_empty_path)]


class RetentionConfig(ConfigModel):
    """How long the log keeps events; whichever limit is reached first applies."""

    time: RetentionTime = Field(default=timedelta(days=7), description="'7d', '12h', or 'forever'")
    size: RetentionSize = Field(default=None, description="per partition: '10GiB', or 'forever'",
                                json_schema_extra={"default": "forever"})


class CompactionConfig(ConfigModel):
    """Keep only the newest event per key in closed segments."""

    interval: Duration = Field(
        default=timedelta(minutes=10),
        description="how often to compact (each round runs in a child process of the "
                    "capture, at a lower CPU priority)")
    min_dirty_ratio: float = Field(default=0.5, gt=0, le=1,
                                   description="compact when this share of a log is stale")


class LogConfig(ConfigModel):
    """The partitioned event log between the capture and the connectors."""

    backend: Literal["file", "kafka"] = Field(default="file", description="file: local disk; kafka")
    path: LocalPath | None = Field(default=None, description="the log's directory (file backend)")
    bootstrap_servers: Annotated[tuple[BootstrapServer, ...], BeforeValidator(_split_servers)] = (
        Field(default=(), description="'host:port' of Kafka brokers (kafka backend)"))
    topic_prefix: TopicName | None = Field(
        default=None, description="topics are <prefix>.<schema>.<table>; default: the slot name")
    topic_names: dict[str, TopicName] = Field(
        default_factory=dict, description="a topic per table, overriding the naming rule: "
        "'schema.table' (or '\"Odd Schema\".\"Odd Table\"') → topic name, e.g. "
        "{'Sales Dept.Order Items': 'app.sales.order_items'}; for two tables whose names "
        "map to the same topic")
    partitions: int = Field(default=3, ge=1, le=4096, description="partitions per topic")
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    segment_bytes: DataSize = Field(default=64 * 1024**2,
                                    description="segment file size, e.g. 64MiB")
    fsync: bool = Field(default=True, description="make each appended batch durable before "
                        "it is acknowledged: one fdatasync of the batch journal per batch "
                        "(file backend)")
    open_files: int = Field(
        default=128, ge=8, le=65536,
        description="segment files the file backend's readers and connector-side writers "
        "keep open at once, all topics and partitions together (least recently used closed "
        "first, fsync'd before); the capture's writer keeps none open between batches")
    max_record_bytes: DataSize = Field(
        default=16 * 1024**2, ge=1024, le=512 * 1024**2,
        description="largest record (one row's event) the capture may write, e.g. 16MiB; "
        "kafka backend: topics are created and producers set to take it")
    compaction: CompactionConfig | None = Field(default=None, description="null: no compaction")
    columnar_path: LocalPath | None = Field(
        default=None, description="kafka backend: the directory where `cdc log columnar` "
        "writes Parquet companions of the topics' records (chunks of offsets) and where the "
        "Spark jobs read them; null: the jobs read Kafka only (the file backend keeps its "
        "companions under <path>/_columnar)")
    group_session_timeout: Annotated[Duration, AfterValidator(_session_timeout)] = Field(
        default=timedelta(seconds=10), description="a consumer group's member (a connector's "
        "process) that stops heartbeating — killed, its host gone, hung — loses its "
        "partitions to the other members after this (heartbeats go every second on the file "
        "backend, every 3 s on Kafka, from a thread of their own: a slow batch does not cost "
        "the membership); longer rides out long pauses without a rebalance, shorter moves a "
        "dead member's partitions sooner; 6s to 30m (a Kafka broker's default bounds)")
    replication_factor: int | None = Field(
        default=None, ge=1, le=32, description="kafka backend: replicas of every topic the "
        "pipeline creates (history topics included); null: 3 on a cluster of 3 brokers or "
        "more, else every broker")
    min_insync_replicas: int | None = Field(
        default=None, ge=1, le=32, description="kafka backend: replicas that must hold a "
        "record before the capture's write counts as durable (min.insync.replicas of its "
        "topics; with fewer in sync the capture acknowledges nothing and waits); null: 2 "
        "where replication_factor is 3 or more, else 1")

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="kafka backend: how clients talk to the brokers: "
        "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT (a login, no TLS) or SASL_SSL (a login over TLS)")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, description="kafka backend, SASL_*: the login's mechanism")
    sasl_username: str | None = Field(default=None,
                                      description="kafka backend, SASL_*: the login's user")
    sasl_password: SecretStr | None = Field(
        default=None, description="kafka backend, SASL_*: the login's password (or "
        "sasl_password_file: a file holding it)")
    ssl_ca_location: Path | None = Field(
        default=None, description="kafka backend, SSL/SASL_SSL: PEM file of the CA "
        "certificates that sign the brokers' certificates; null: the system's CAs")
    ssl_certificate_location: Path | None = Field(
        default=None, description="kafka backend, SSL/SASL_SSL: PEM file of this client's "
        "certificate, for brokers that require one (with ssl_key_location)")
    ssl_key_location: Path | None = Field(
        default=None, description="kafka backend, SSL/SASL_SSL: PEM file of the key of "
        "ssl_certificate_location")
    ssl_key_password: SecretStr | None = Field(
        default=None, description="kafka backend: the password of an encrypted "
        "ssl_key_location (or ssl_key_password_file)")
    ssl_verify_hostname: bool = Field(
        default=True, description="kafka backend, SSL/SASL_SSL: check that a broker's "
        "certificate names the host connected to (false: any certificate of a trusted CA)")

    @model_validator(mode="after")
    def _backend_settings(self) -> LogConfig:
        problems: list[tuple[Loc, str, object]] = []
        if self.backend == "file" and self.path is None:
            problems.append((("path",), "required when backend is 'file'; "
                             "expected the log's directory, like './.data/log'", None))
        if self.backend == "kafka" and not self.bootstrap_servers:
            problems.append((("bootstrap_servers",), "required when backend is 'kafka'; "
                             "expected a list of 'host:port'", None))
        if self.backend == "kafka" and self.path is not None:
            problems.append((("path",), "only used when backend is 'file'; "
                             "remove it or set backend: file", str(self.path)))
        if self.backend == "file" and self.columnar_path is not None:
            problems.append((("columnar_path",), "only used when backend is 'kafka' (the file "
                             "log's companions are under <path>/_columnar); remove it",
                             str(self.columnar_path)))
        if self.backend == "file" and self.bootstrap_servers:
            problems.append((("bootstrap_servers",), "only used when backend is 'kafka'; "
                             "remove it or set backend: kafka", None))
        size = self.retention.size
        if self.backend == "file" and size is not None and size < self.segment_bytes:
            problems.append((("retention", "size"), f"smaller than segment_bytes "
                             f"({self.segment_bytes} bytes): retention keeps whole segments, so "
                             "it could never hold to this; raise it or lower segment_bytes",
                             size))
        factor, in_sync = self.replication_factor, self.min_insync_replicas
        if factor is not None and in_sync is not None and in_sync > factor:
            problems.append((("min_insync_replicas",), f"larger than replication_factor "
                             f"({factor}): no write could ever succeed; lower it", in_sync))
        problems += self._security_problems()
        if problems:
            raise_field_problems("LogConfig", problems)
        return self

    def _security_problems(self) -> list[tuple[Loc, str, object]]:
        """Security settings that contradict ``backend``, ``security_protocol`` or each
        other; files that do not exist. Passwords are never shown."""
        sasl = {"sasl_mechanism": self.sasl_mechanism, "sasl_username": self.sasl_username,
                "sasl_password": self.sasl_password}
        tls = {"ssl_ca_location": self.ssl_ca_location,
               "ssl_certificate_location": self.ssl_certificate_location,
               "ssl_key_location": self.ssl_key_location,
               "ssl_key_password": self.ssl_key_password,
               "ssl_verify_hostname": None if self.ssl_verify_hostname else False}
        shown = {name: None if name.endswith("password") or value is None else str(value)
                 for name, value in {**sasl, **tls}.items()}
        problems: list[tuple[Loc, str, object]] = []
        if self.backend == "file":
            given: list[tuple[str, str | None]] = (
                [("security_protocol", self.security_protocol)]
                if self.security_protocol != "PLAINTEXT" else [])
            given += [(name, shown[name]) for name, value in {**sasl, **tls}.items()
                      if value is not None]
            return [((name,), "only used when backend is 'kafka'; remove it or set "
                     "backend: kafka", value) for name, value in given]
        protocol = self.security_protocol
        if protocol.startswith("SASL_"):
            problems += [((name,), f"required when security_protocol is {protocol}; "
                          f"expected {_EXPECTED[name]}", None)
                         for name, value in sasl.items() if value is None]
        else:
            problems += [((name,), f"only used when security_protocol is SASL_PLAINTEXT or "
                          f"SASL_SSL (it is {protocol}); remove it or set security_protocol: "
                          "SASL_SSL", shown[name]) for name, value in sasl.items()
                         if value is not None]
        if not protocol.endswith("SSL"):
            problems += [((name,), f"only used when security_protocol is SSL or SASL_SSL "
                          f"(it is {protocol}); remove it or set security_protocol: SASL_SSL "
                          "(or SSL)", shown[name]) for name, value in tls.items()
                         if value is not None]
            return problems
        pair = ("ssl_certificate_location", "ssl_key_location")
        for name, other in (pair, pair[::-1]):
            if tls[name] is not None and tls[other] is None:
                problems.append(((other,), f"required when {name} is set (a client "
                                 "certificate needs its key)", None))
        if self.ssl_key_password is not None and self.ssl_key_location is None:
            problems.append((("ssl_key_password",), "only used with ssl_key_location; "
                             "remove it or set ssl_key_location", None))
        for name in ("ssl_ca_location", *pair):
            location = tls[name]
            if isinstance(location, Path) and not location.is_file():
                problems.append(((name,), "no such file; expected a PEM file", str(location)))
        return problems


_EXPECTED = {"sasl_mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
             "sasl_username": "the user Kafka knows this pipeline as",
             "sasl_password": "the user's password (or sasl_password_file)"}
