"""Logging for the long-running commands (``capture``, ``connect``, ``run``)."""

from __future__ import annotations

import logging

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: int = logging.INFO) -> None:
    """Log to stderr with time, level and logger name."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
