"""Test-wide settings: integration tests are marked by where they live; a shuffled run
names its order at the end."""

from __future__ import annotations

from pathlib import Path

import pytest

_INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/integration`` with ``integration``."""
    for item in items:
        if _INTEGRATION_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """Name the order of a shuffled run (``--random-order``) in its last lines, where
    ``-q`` (``make test``) keeps it, so that ``--random-order-seed`` can run it again."""
    try:
        from random_order.config import Config as RandomOrder
    except ImportError:  # pytest-random-order (the dev extra) is not installed
        return
    order = RandomOrder(config)
    if order.is_enabled:
        terminalreporter.write_line(f"random order: --random-order-bucket={order.bucket_type} "
                                    f"--random-order-seed={order.seed}")
