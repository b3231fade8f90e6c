"""Columnar companions of the file log's sealed segments: where they live, and when one
can be trusted.

A segment is sealed once a later one exists in its partition: the writer never appends
to it again. Its companion holds the same records as Parquet:

    <log>/_columnar/<topic dir>/partition=<p>/<base offset>.parquet
    <log>/_columnar/<topic dir>/partition=<p>/<base offset>.json   (the manifest)

The manifest is written last, so a companion without one (a writer killed on the way) is
never read. It records a stamp of the segment (its size and a CRC-32 of its last 64 KiB:
compaction only removes records, so a rewritten segment of the same size is the same
segment) and the companion's own size and CRC-32. A reader checks both before every use:
the segment's JSON lines stay the source of truth, and a companion that does not match
them — the segment compacted, truncated by a repair, the companion damaged or
half-written — is not read; ``cdc log columnar`` writes it again.

Everything here is plain Python (no Spark): the Spark side is ``columnar``.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from cdc.log.file import topic_dir
from cdc.log.file.segments import list_segments, segment_name

COLUMNAR_DIR = "_columnar"
FORMAT = 1
STAMP_TAIL_BYTES = 1 << 16
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class SegmentStamp:
    """What identifies a segment's content: its size and the CRC-32 of its tail."""

    size: int
    tail_crc: int

    @classmethod
    def of(cls, path: Path) -> SegmentStamp:
        """The stamp of the segment at ``path`` (``FileNotFoundError`` if it is gone)."""
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - STAMP_TAIL_BYTES))
            return cls(size, zlib.crc32(file.read(STAMP_TAIL_BYTES)))


class JsonManifest:
    """A manifest dataclass written as JSON (its fields, by name)."""

    __slots__ = ()

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Manifest(JsonManifest):
    """What a companion was written from, and what it is."""

    segment: SegmentStamp
    records: int
    companion_bytes: int
    companion_crc: int
    columns: tuple[str, ...]  # the row columns ``before``/``after`` hold
    format: int = FORMAT

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """A manifest from its file; ``ValueError`` when it is not one."""
        try:
            raw = json.loads(data)
            return cls(SegmentStamp(int(raw["segment"]["size"]),
                                    int(raw["segment"]["tail_crc"])),
                       int(raw["records"]), int(raw["companion_bytes"]),
                       int(raw["companion_crc"]), tuple(str(c) for c in raw["columns"]),
                       int(raw["format"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a companion manifest: {exc!r}") from None


def file_crc(path: Path) -> int:
    """CRC-32 of a whole file."""
    crc = 0
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def columnar_root(log_root: Path | str) -> Path:
    """Where every companion of the log at ``log_root`` lives."""
    return Path(log_root) / COLUMNAR_DIR


def companion_dir(log_root: Path | str, topic: str, partition: int) -> Path:
    """The directory of one partition's companions."""
    return columnar_root(log_root) / topic_dir(log_root, topic).name / f"partition={partition}"


def segment_path(log_root: Path | str, topic: str, partition: int, base: int) -> Path:
    """The JSON-lines segment starting at ``base``."""
    return topic_dir(log_root, topic) / f"partition={partition}" / segment_name(base)


def companion_paths(log_root: Path | str, topic: str, partition: int,
                    base: int) -> tuple[Path, Path]:
    """``(parquet, manifest)`` of the segment starting at ``base``."""
    directory = companion_dir(log_root, topic, partition)
    stem = f"{base:020d}"
    return directory / f"{stem}.parquet", directory / f"{stem}.json"


def partition_segments(log_root: Path | str, topic: str, partition: int) -> list[int]:
    """Base offsets of the partition's segments, ascending."""
    return list_segments(topic_dir(log_root, topic) / f"partition={partition}")


def sealed(bases: list[int]) -> list[int]:
    """The segments no write reaches any more: all but the last."""
    return bases[:-1]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a sealed segment's companion can be read instead of it, and why not."""

    manifest: Manifest | None
    problem: str  # "" when usable; "missing" when none was written; else what is wrong

    @property
    def usable(self) -> bool:
        return self.manifest is not None and not self.problem


def check_companion(log_root: Path | str, topic: str, partition: int, base: int) -> Verdict:
    """Whether the companion of one segment matches it (see the module docstring)."""
    parquet, manifest_path = companion_paths(log_root, topic, partition, base)
    try:
        data = manifest_path.read_bytes()
    except FileNotFoundError:
        return Verdict(None, "missing")
    try:
        manifest = Manifest.from_json(data)
    except ValueError as exc:
        return Verdict(None, f"manifest {manifest_path} unreadable ({exc})")
    if manifest.format != FORMAT:
        return Verdict(manifest, f"format {manifest.format}, this version reads {FORMAT}")
    try:
        stamp = SegmentStamp.of(segment_path(log_root, topic, partition, base))
    except FileNotFoundError:
        return Verdict(manifest, "its segment is gone (retention or compaction)")
    if stamp != manifest.segment:
        return Verdict(manifest, f"the segment changed since (now {stamp.size} bytes, "
                       f"then {manifest.segment.size}): compacted or repaired")
    try:
        size = parquet.stat().st_size
    except FileNotFoundError:
        return Verdict(manifest, f"{parquet.name} is missing")
    if size != manifest.companion_bytes or file_crc(parquet) != manifest.companion_crc:
        return Verdict(manifest, f"{parquet} is damaged (size or CRC-32 differs from its "
                       "manifest)")
    return Verdict(manifest, "")


class SupportsJson(Protocol):
    """A manifest: what it holds, as JSON bytes."""

    def to_json(self) -> bytes: ...


def write_manifest(path: Path, manifest: SupportsJson) -> None:
    """Write a manifest durably and atomically (the last step of writing a companion)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as file:
        file.write(manifest.to_json())
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    sync_dir(path.parent)


def sync_dir(directory: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_companion(log_root: Path | str, topic: str, partition: int, base: int) -> None:
    """Remove a companion, its manifest first (so no reader trusts a half-removed one)."""
    parquet, manifest = companion_paths(log_root, topic, partition, base)
    manifest.unlink(missing_ok=True)
    parquet.unlink(missing_ok=True)


def companion_bases(log_root: Path | str, topic: str, partition: int) -> list[int]:
    """Base offsets with any companion file (manifest or Parquet), for clean-up."""
    try:
        names = os.listdir(companion_dir(log_root, topic, partition))
    except FileNotFoundError:
        return []
    stems = {name.split(".", 1)[0] for name in names if not name.startswith(".")}
    return sorted(int(stem) for stem in stems if stem.isdigit())
