"""A sink whose login Redis refuses, or whose server's TLS certificate does not verify, or
that speaks TLS to a server that does not (Redis, OpenSearch), stops the connector at
start-up with one line naming the setting (exit status 2), instead of retrying as if the
server were down; once it has connected, the same refusal (a password rotated mid-run) is
retried. OpenSearch's own logins and certificates, against a node with its security
plugin: test_opensearch_security.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cdc.errors import ConfigError
from compose.launcher.redis import RedisServer
from connectors.contract import SinkUnavailableError
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis import RedisSinkConfig
from connectors.redis.sink import RedisSink

from .certs import CertificateAuthority
from .cli import cdc, connector_pipeline, the_one_error_line

PASSWORD = "redis-Secret-5531"
WRONG = "not-the-Secret-0077"


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[RedisServer]:
    with RedisServer(password=PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[RedisServer, CertificateAuthority, CertificateAuthority]]:
    """A Redis speaking TLS with a certificate of one CA, that CA, and another one."""
    directory = tmp_path_factory.mktemp("redis-tls")
    issuer = CertificateAuthority.create(directory, "issuer")
    stranger = CertificateAuthority.create(directory, "stranger")
    with RedisServer(tls=issuer.issue("redis", "redis", server=True)) as server:
        yield server, issuer, stranger


def sink(server: RedisServer, password: str | None, *, url: str | None = None) -> RedisSink:
    settings: dict[str, object] = {"url": url or server.url, "timeout": "2s"}
    if password is not None:
        settings["password"] = password
    return RedisSink(RedisSinkConfig.model_validate(settings))


def test_a_wrong_or_missing_password_is_a_config_error(locked_redis: RedisServer) -> None:
    for password, field in ((WRONG, "config.password"), (None, "config.url")):
        with pytest.raises(ConfigError, match=f"{field}: Redis at 127.0.0.1:"
                           f"{locked_redis.port}: Redis refused the login") as raised:
            sink(locked_redis, password).open()
        assert WRONG not in str(raised.value) and PASSWORD not in str(raised.value)
    right = sink(locked_redis, PASSWORD)
    right.open()
    right.close()


def test_a_password_rotated_mid_run_is_retried(locked_redis: RedisServer) -> None:
    opened = sink(locked_redis, PASSWORD)
    opened.open()
    admin = redis.Redis(host="127.0.0.1", port=locked_redis.port, password=PASSWORD)
    admin.config_set("requirepass", WRONG)
    try:
        opened.close()
        with pytest.raises(SinkUnavailableError, match="AuthenticationError"):
            opened.open()  # connected before: an operator may put the password back
    finally:
        redis.Redis(host="127.0.0.1", port=locked_redis.port,
                    password=WRONG).config_set("requirepass", PASSWORD)
        admin.close()
        opened.close()


def test_cdc_connect_stops_with_the_setting_to_fix(locked_redis: RedisServer,
                                                   tmp_path: Path) -> None:
    (tmp_path / "redis-password").write_text(WRONG + "\n")
    config = connector_pipeline(tmp_path, "cache", "redis", {
        "url": locked_redis.url, "password_file": str(tmp_path / "redis-password"),
        "timeout": "2s"})
    done = cdc("connect", "-c", str(config), timeout=120)
    assert the_one_error_line(done).startswith(
        "Error: connector 'cache': config.password: Redis at 127.0.0.1:"), done.stderr[-3000:]
    assert WRONG not in done.stdout + done.stderr


def test_a_certificate_that_does_not_verify_is_a_config_error(
        tls_redis: tuple[RedisServer, CertificateAuthority, CertificateAuthority]) -> None:
    server, issuer, stranger = tls_redis
    assert server.url.startswith("rediss://")
    with pytest.raises(ConfigError, match=f"config.url: Redis at 127.0.0.1:{server.port}: "
                       "Redis's TLS certificate did not verify"):
        sink(server, None, url=f"{server.url}?ssl_ca_certs={stranger.cert}").open()
    trusted = sink(server, None, url=f"{server.url}?ssl_ca_certs={issuer.cert}")
    trusted.open()  # the same server, its own CA trusted
    trusted.close()


def test_an_expired_ca_certificate_is_a_config_error(
        tls_redis: tuple[RedisServer, CertificateAuthority, CertificateAuthority]) -> None:
    server, issuer, _ = tls_redis
    with pytest.raises(ConfigError, match=f"config.url: Redis at 127.0.0.1:{server.port}: "
                       "Redis's TLS certificate did not verify"):
        sink(server, None, url=f"{server.url}?ssl_ca_certs={issuer.expired()}").open()


def test_opensearch_over_tls_to_a_plain_http_server_is_a_config_error(
        opensearch_url: str) -> None:
    https = opensearch_url.replace("http://", "https://", 1)
    config = OpenSearchSinkConfig.model_validate({"hosts": [https], "request_timeout": "5s"})
    with pytest.raises(ConfigError, match=r"config\.hosts: OpenSearch at 127\.0\.0\.1:\d+: "
                       "the server did not answer TLS"):
        OpenSearchSink(config).open()
    plain = OpenSearchSink(OpenSearchSinkConfig.model_validate({"hosts": [opensearch_url]}))
    plain.open()  # the same server, by its scheme
    plain.close()

