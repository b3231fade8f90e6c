"""The repository's own files, as a clone has them (no virtualenv, caches or build output)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .import_rules import REPO

IGNORED_DIRS = frozenset({".git", ".venv", ".cache", ".data", ".hypothesis", ".mypy_cache",
                          ".ruff_cache", ".pytest_cache", "__pycache__", "build", "dist",
                          "spark-warehouse", "metastore_db", "node_modules",
                          "target"})  # native/target: cargo's build output
TEXT_SUFFIXES = frozenset({".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".xml", ".json",
                           ".txt", ".cfg", ".ini", ".sql", ".html", ".js", ".css", ".rs", ""})


def _ignored(path: Path) -> bool:
    relative = path.relative_to(REPO).parts
    return any(part in IGNORED_DIRS or part.endswith(".egg-info") for part in relative)


def repository_files() -> Iterator[Path]:
    """Every file of the repository (not under an ignored folder)."""
    for path in sorted(REPO.rglob("*")):
        if path.is_file() and not _ignored(path):
            yield path


def text_files() -> Iterator[Path]:
    """The repository's text files: sources, docs, configs, scripts."""
    for path in repository_files():
        if path.suffix in TEXT_SUFFIXES or path.name in {"Makefile", "Dockerfile"}:
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            yield path


def top_level_names() -> frozenset[str]:
    """The names at the repository's root that a clone has (``cdc``, ``README.md``, ...)."""
    return frozenset(path.name for path in REPO.iterdir() if not _ignored(path))
