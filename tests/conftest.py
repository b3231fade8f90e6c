"""Test-wide settings: integration tests are marked by where they live."""

from __future__ import annotations

from pathlib import Path

import pytest

_INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/integration`` with ``integration``."""
    for item in items:
        if _INTEGRATION_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
