"""``--log-format json`` and the secret scrubber of ``cdc.logsetup``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cdc import logsetup
from cdc.cli import main
from cdc.config.models import PipelineConfig
from cdc.config.secrets import Redactor
from cdc.logsetup import JsonFormatter, SecretScrubber, config_secrets, set_log_format

PASSWORD = "pa55-w0rd-xyz"
TOKEN = "metrics-t0ken-abc"


def pipeline_config() -> PipelineConfig:
    return PipelineConfig.model_validate({
        "source": {"dsn": f"postgresql://app:{PASSWORD}@127.0.0.1/app", "slot": "s",
                   "publication": "p"},
        "log": {"backend": "file", "path": "/tmp/log"},
        "connectors": [{"name": "cache", "type": "redis", "topics": ["s.public.t"],
                        "config": {"url": "redis://:r3dis-secret@127.0.0.1:6379/0"}}],
        "metrics": {"port": 9187, "token": TOKEN}})


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO, SecretScrubber]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    scrubber = SecretScrubber()
    handler.addFilter(scrubber)
    logger = logging.getLogger("test.logformat")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, stream, scrubber
    logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_object_per_line_with_extra_fields(
        captured: tuple[logging.Logger, io.StringIO, SecretScrubber]) -> None:
    logger, stream, _ = captured
    logger.info("capture at %s: %d events", "0/16B3748", 42,
                extra={"slot": "app", "partition": 3})
    logger.warning("two\nlines")
    first, second = lines(stream)
    assert first["level"] == "INFO" and first["logger"] == "test.logformat"
    assert first["message"] == "capture at 0/16B3748: 42 events"
    assert first["slot"] == "app" and first["partition"] == 3
    assert str(first["ts"]).endswith("Z") and "T" in str(first["ts"])
    assert second["message"] == "two\nlines" and second["level"] == "WARNING"


def test_exceptions_are_one_field(
        captured: tuple[logging.Logger, io.StringIO, SecretScrubber]) -> None:
    logger, stream, _ = captured
    try:
        raise ValueError("bad thing")
    except ValueError:
        logger.exception("failed")
    (record,) = lines(stream)
    assert "ValueError: bad thing" in str(record["exc"])


def test_config_secrets_are_found() -> None:
    assert {PASSWORD, TOKEN, "r3dis-secret"} <= config_secrets(pipeline_config())


def test_no_secret_reaches_a_log_line(
        captured: tuple[logging.Logger, io.StringIO, SecretScrubber]) -> None:
    logger, stream, scrubber = captured
    scrubber.redactor = Redactor(config_secrets(pipeline_config()))
    logger.info("connecting to postgresql://app:%s@127.0.0.1/app", PASSWORD,
                extra={"dsn": f"password={PASSWORD}", "token": TOKEN})
    try:
        raise RuntimeError(f"auth failed with {TOKEN}")
    except RuntimeError:
        logger.exception("redis at redis://:r3dis-secret@127.0.0.1 refused")
    text = stream.getvalue()
    for secret in (PASSWORD, TOKEN, "r3dis-secret"):
        assert secret not in text
    first, second = lines(stream)
    assert first["message"] == "connecting to postgresql://app:***@127.0.0.1/app"
    assert first["dsn"] == "password=***" and first["token"] == "***"
    assert "RuntimeError: auth failed with ***" in str(second["exc"])


def test_the_cli_option_selects_the_format() -> None:
    try:
        result = CliRunner().invoke(main, ["--log-format", "json", "log", "--help"])
        assert result.exit_code == 0
        assert logsetup._format == "json"
        bad = CliRunner().invoke(main, ["--log-format", "xml", "log", "--help"])
        assert bad.exit_code == 2 and "xml" in bad.output
    finally:
        set_log_format("text")


@pytest.mark.parametrize(("level", "expected"), [(logging.INFO, logging.ERROR),
                                                 (logging.DEBUG, logging.NOTSET)])
def test_client_request_loggers_are_quiet_unless_debugging(level: int, expected: int) -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved = {name: logging.getLogger(name).level for name in logsetup.CLIENT_REQUEST_LOGGERS}
    try:
        root.handlers = []  # basicConfig only configures a root without handlers
        for name in saved:
            logging.getLogger(name).setLevel(logging.NOTSET)
        logsetup.configure_logging(level)
        assert {logging.getLogger(name).level for name in saved} == {expected}
        assert logging.getLogger("opensearch").isEnabledFor(logging.WARNING) is (
            level == logging.DEBUG)
    finally:
        root.handlers, root.level = saved_handlers, saved_level
        for name, value in saved.items():
            logging.getLogger(name).setLevel(value)
