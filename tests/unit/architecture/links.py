"""What the docs point at: relative Markdown links and repository paths in backticks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .import_rules import REPO

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PLACEHOLDER = re.compile(r"[<>*{}$?\[\]|]")
_EXTERNAL = ("http://", "https://", "mailto:", "ftp://", "#")


@dataclass(frozen=True, slots=True)
class Reference:
    """One path a document mentions, and where."""

    document: Path
    line: int
    target: str
    kind: str  # "link" or "code"

    def __str__(self) -> str:
        return f"{self.document.relative_to(REPO)}:{self.line}: {self.kind} {self.target!r}"


def _prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines outside fenced code blocks (commands and samples live in those)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def links(document: Path, text: str) -> Iterator[Reference]:
    """The relative links of a Markdown document (external links and anchors skipped)."""
    for number, line in _prose_lines(text):
        for match in _LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if not target.startswith(_EXTERNAL):
                yield Reference(document, number, target, "link")


def code_paths(document: Path, text: str, roots: frozenset[str]) -> Iterator[Reference]:
    """Backticked words that look like repository paths: they start at a root entry
    (``cdc/log/file/``, ``compose/pipeline.yaml``, ``pyproject.toml``) and hold no
    placeholder (``connectors/<name>/``) or whitespace (a command)."""
    for number, line in _prose_lines(text):
        for match in _CODE.finditer(line):
            word = match.group(1).strip()
            if not word or " " in word or _PLACEHOLDER.search(word) or "://" in word:
                continue
            word = word.removeprefix("./")
            if word.split("/", 1)[0] in roots and ("/" in word or "." in word):
                yield Reference(document, number, word, "code")


def resolves(reference: Reference) -> Path:
    """The file or folder a reference names: links relative to their document, backticked
    paths relative to the repository root."""
    target = reference.target.split("#", 1)[0]
    base = reference.document.parent if reference.kind == "link" else REPO
    return (base / target).resolve()
