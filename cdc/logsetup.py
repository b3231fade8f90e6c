"""Logging for the long-running commands (``capture``, ``connect``, ``run``, …).

``cdc --log-format json`` writes one JSON object per line (``ts``, ``level``, ``logger``,
``message``, then the record's extra fields such as ``slot``, ``topic``, ``connector``);
the default is one line of text. Whatever the format, ``protect_secrets(config)`` makes
every secret of the pipeline file unprintable: it is replaced by ``***`` in the message,
the extra fields and tracebacks (a line holding a secret too short to scrub is withheld).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from cdc.config.conninfo import dsn_secrets
from cdc.config.secrets import Redactor

LogFormat = Literal["text", "json"]
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# client libraries that log every request (INFO) and a traceback per failed attempt
# (WARNING); quiet unless debugging
CLIENT_REQUEST_LOGGERS = ("opensearch", "urllib3")
WITHHELD = "(log line withheld: it contains a secret)"
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "taskName"}

_format: LogFormat = "text"


def set_log_format(log_format: LogFormat) -> None:
    """Choose the format ``configure_logging`` installs (``cdc --log-format``)."""
    global _format
    _format = log_format


def current_log_format() -> LogFormat:
    """The format ``configure_logging`` installs (``cdc run`` passes it to its children)."""
    return _format


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a call added with ``extra={…}``."""
    return {key: value for key, value in record.__dict__.items()
            if key not in _STANDARD_ATTRS and not key.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (UTC, ISO 8601), level, logger, message, extras."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for key, value in extra_fields(record).items():
            document.setdefault(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            document["exc"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, default=str, ensure_ascii=False)


class SecretScrubber(logging.Filter):
    """Removes known secrets from records before any handler formats them."""

    def __init__(self) -> None:
        super().__init__()
        self.redactor: Redactor | None = None

    def _clean(self, text: str) -> str:
        assert self.redactor is not None
        clean = self.redactor.scrub(text)
        return WITHHELD if self.redactor.leaks(clean) else clean

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message, string extras and traceback without secrets."""
        if self.redactor is None:
            return True
        record.msg, record.args = self._clean(record.getMessage()), None
        for key, value in extra_fields(record).items():
            if isinstance(value, str):
                setattr(record, key, self._clean(value))
        if record.exc_info:
            record.exc_text = self._clean(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


SCRUBBER = SecretScrubber()


def _strings_and_secrets(value: object) -> tuple[set[str], set[str]]:
    if isinstance(value, SecretStr):
        return set(), {value.get_secret_value()}
    if isinstance(value, str):
        return {value}, set()
    items: list[object] = []
    if isinstance(value, BaseModel):
        items = [getattr(value, name) for name in type(value).model_fields]
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    strings: set[str] = set()
    secrets: set[str] = set()
    for item in items:
        more_strings, more_secrets = _strings_and_secrets(item)
        strings |= more_strings
        secrets |= more_secrets
    return strings, secrets


def config_secrets(config: BaseModel) -> set[str]:
    """Every secret in a loaded config: ``SecretStr`` values, passwords in URLs and DSNs."""
    strings, secrets = _strings_and_secrets(config)
    for text in strings:
        if "://" in text:
            with contextlib.suppress(ValueError):
                secrets.update(filter(None, [urlsplit(text).password]))
            secrets.update(re.findall(r"://[^:/@\s]*:([^@\s]+)@", text))
        if "=" in text or "://" in text:
            secrets.update(dsn_secrets(text))
    return {secret for secret in secrets if secret}


def protect_secrets(config: BaseModel) -> None:
    """From now on, no log line shows a secret of ``config``."""
    SCRUBBER.redactor = Redactor(config_secrets(config))


def configure_logging(level: int = logging.INFO) -> None:
    """Log to stderr in the chosen format (text: time, level, logger name, message)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if _format == "json" else logging.Formatter(LOG_FORMAT))
    handler.addFilter(SCRUBBER)
    logging.basicConfig(level=level, handlers=[handler])
    if level > logging.DEBUG:  # our retry layer says what failed, once per attempt
        for name in CLIENT_REQUEST_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
