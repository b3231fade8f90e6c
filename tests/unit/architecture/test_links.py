"""The README and the docs point only at files the repository has; nothing points outside.

A clone holds the repository and nothing around it: a link to a sibling folder (the
development machine's shared notes) or an absolute path of that machine is broken for
every reader.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from .import_rules import REPO
from .links import Reference, code_paths, links, resolves
from .repository_files import repository_files, text_files, top_level_names

DOCUMENTS = sorted([REPO / "README.md", *(REPO / "docs").glob("**/*.md")])
SIBLING = ".." + "/shared"  # spelled in two parts so this file does not match itself


def references(document: Path) -> list[Reference]:
    text = document.read_text(encoding="utf-8")
    return [*links(document, text), *code_paths(document, text, top_level_names())]


def broken(found: list[Reference]) -> list[str]:
    problems = []
    for reference in found:
        target = resolves(reference)
        if not target.is_relative_to(REPO):
            problems.append(f"{reference}: outside the repository")
        elif not target.exists():
            problems.append(f"{reference}: no such file")
    return problems


def test_the_docs_exist() -> None:
    assert REPO / "README.md" in DOCUMENTS
    assert REPO / "docs" / "architecture.md" in DOCUMENTS


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_path_of_a_document_exists(document: Path) -> None:
    assert broken(references(document)) == []


def test_the_readme_names_repository_paths() -> None:
    found = {reference.target for reference in references(REPO / "README.md")}
    assert "docs/architecture.md" in found and "compose/pipeline.yaml" in found


def test_no_file_refers_outside_the_repository() -> None:
    machine_paths = {SIBLING, str(REPO) + "/"}
    shared_folders = {Path(REPO.anchor), Path(tempfile.gettempdir()), Path.home()}
    if REPO.parent not in shared_folders:  # the folder that holds the clone (not /tmp: tests
        machine_paths.add(str(REPO.parent) + "/")  # may well name paths under it)
    offending = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                 for path in text_files()
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(),
                                               start=1)
                 if any(text in line for text in machine_paths)]
    assert offending == []
    assert len(list(repository_files())) > 100


def test_a_broken_link_fails() -> None:
    document = REPO / "example.md"  # never written: only its location matters
    text = ("See [the design](docs/architecture.md), [gone](missing.md#part), "
            f"[notes]({SIBLING}/ARCHITECTURE.md) and [site](https://example.org).\n"
            "```\n[not a link](inside-a-fence.md)\n```\n")
    assert [str(r.target) for r in links(document, text)] == [
        "docs/architecture.md", "missing.md#part", f"{SIBLING}/ARCHITECTURE.md"]
    assert broken(list(links(document, text))) == [
        "example.md:1: link 'missing.md#part': no such file",
        f"example.md:1: link '{SIBLING}/ARCHITECTURE.md': outside the repository"]


def test_a_stale_code_path_fails() -> None:
    document = REPO / "README.md"
    text = ("The sinks live in `connectors/redis/` and `connectors/gone.py`; write\n"
            "`connectors/<name>/config.py`, run `cdc log topics`, see `pyproject.toml`.\n")
    found = list(code_paths(document, text, top_level_names()))
    assert [r.target for r in found] == ["connectors/redis/", "connectors/gone.py",
                                         "pyproject.toml"]
    assert broken(found) == ["README.md:1: code 'connectors/gone.py': no such file"]
