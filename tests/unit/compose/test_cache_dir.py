"""Where the launcher keeps its downloads: ``DISTRIBUTARY_CACHE``, else the machine-wide
folder shared by every clone, else the clone's ``.cache`` — readable by all users."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose.launcher import base, cache_dir


@pytest.fixture
def strict_umask() -> Iterator[None]:
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def test_the_variable_names_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRIBUTARY_CACHE", str(tmp_path / "mine"))
    monkeypatch.setattr(base, "SHARED_CACHE", tmp_path / "shared")
    assert cache_dir() == tmp_path / "mine"
    assert not (tmp_path / "shared").exists()


def test_the_shared_cache_is_readable_by_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             strict_umask: None) -> None:
    monkeypatch.delenv("DISTRIBUTARY_CACHE", raising=False)
    monkeypatch.setattr(base, "SHARED_CACHE", tmp_path / "var" / "distributary")
    assert cache_dir() == tmp_path / "var" / "distributary"
    assert stat.S_IMODE(cache_dir().stat().st_mode) == 0o755  # initdb runs as postgres
    with base.file_lock(cache_dir() / "postgres" / "1.0.lock"):
        assert stat.S_IMODE((cache_dir() / "postgres").stat().st_mode) == 0o755


def test_the_clone_keeps_its_own_when_the_shared_one_cannot_be_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTRIBUTARY_CACHE", raising=False)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(base, "SHARED_CACHE", tmp_path / "a-file" / "distributary")
    monkeypatch.setattr(base, "_REPO_ROOT", tmp_path / "clone")
    assert cache_dir() == tmp_path / "clone" / ".cache"
