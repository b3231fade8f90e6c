"""``cdc log repair``: salvage what passes its checksum, quarantine the original.

Repair is explicit and keeps evidence: each segment with a problem is rewritten with
only its valid records (offsets unchanged, so the bad ones leave a gap readers skip),
and the original file is moved to ``<log>/_quarantine/<topic>/partition=<p>/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .codec import RecordFormatError, decode_record
from .names import topic_dir_name
from .segments import INDEX_ENTRY, INDEX_SUFFIX, scan_segment
from .verify import VerifyProblem, verify_log
from .writer import fsync_dir


@dataclass(frozen=True, slots=True)
class RepairAction:
    """One segment repaired: what was kept, what was dropped, where the original went."""

    segment: str
    kept: int
    dropped: int
    quarantined_as: str


def repair_log(root: Path) -> list[RepairAction]:
    """Repair every segment ``verify_log`` finds a corrupt record in (missing indexes are
    rebuilt on open and need no repair)."""
    report = verify_log(root)
    damaged: dict[str, VerifyProblem] = {}
    for problem in report.problems:
        if "index file missing" not in problem.reason:
            damaged.setdefault(problem.file, problem)
    return [_repair_segment(root, Path(f), p.topic, p.partition) for f, p in damaged.items()]


def _repair_segment(root: Path, path: Path, topic: str, partition: int) -> RepairAction:
    data = path.read_bytes()
    kept: list[bytes] = []
    dropped = 0
    for line in data.split(b"\n"):
        if not line.strip(b"\0"):
            continue
        try:
            decode_record(line, topic, partition)
        except RecordFormatError:
            dropped += 1
            continue
        kept.append(line + b"\n")
    quarantine = root / "_quarantine" / topic_dir_name(topic) / path.parent.name
    quarantine.mkdir(parents=True, exist_ok=True)
    target = quarantine / path.name
    shutil.copy2(path, target)
    tmp = path.with_name(path.name + ".repairing")
    with tmp.open("wb") as out:
        out.write(b"".join(kept))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(FileNotFoundError):
        path.with_suffix(INDEX_SUFFIX).unlink()
    scan = scan_segment(path, topic, partition)
    path.with_suffix(INDEX_SUFFIX).write_bytes(
        b"".join(INDEX_ENTRY.pack(o, p) for o, p in scan.index))
    fsync_dir(path.parent)
    return RepairAction(str(path), len(kept), dropped, str(target))
