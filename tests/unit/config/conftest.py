"""Helpers for config tests: a valid pipeline file, variants of it, and its problems."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.config import PipelineConfig, load_config
from cdc.errors import ConfigError

VALID = """\
source:
  dsn: postgresql://app@127.0.0.1:5432/app
  slot: distributary
  publication: distributary
  tables: [public.orders]
log:
  backend: file
  path: ./.data/log
connectors:
  - name: search
    type: opensearch
    topics: [distributary.public.orders]
    config:
      hosts: [http://127.0.0.1:9200]
"""

REPO_ROOT = Path(__file__).resolve().parents[3]


def variant(old: str, new: str, text: str = VALID) -> str:
    """``text`` with ``old`` replaced by ``new``; fails loudly if ``old`` is not there."""
    assert old in text, f"{old!r} is not in the base config"
    return text.replace(old, new, 1)


WriteConfig = Callable[[str], Path]
LoadProblems = Callable[[str], list[str]]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """Write YAML text to a fresh ``pipeline.yaml`` and return its path."""

    def write(text: str) -> Path:
        path = tmp_path / "pipeline.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def load_valid(write_config: WriteConfig) -> Callable[[str], PipelineConfig]:
    """Load YAML text that must be valid."""
    return lambda text: load_config(write_config(text))


@pytest.fixture
def load_problems(write_config: WriteConfig) -> LoadProblems:
    """Load YAML text that must be invalid; return its problems as printed lines."""

    def problems(text: str) -> list[str]:
        with pytest.raises(ConfigError) as caught:
            load_config(write_config(text))
        return [str(problem) for problem in caught.value.problems]

    return problems


def problem_at(problems: list[str], path: str) -> str:
    """The one problem whose path is exactly ``path``."""
    found = [line for line in problems if line.startswith(path + ": ")]
    assert len(found) == 1, f"expected one problem at {path!r}, got {problems}"
    return found[0]
