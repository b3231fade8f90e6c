"""Columnar companions of a Kafka log: chunks of a partition's offsets as Parquet, under
``log.columnar_path``:

    <columnar_path>/<topic dir>/partition=<p>/<start>-<end>.parquet
    <columnar_path>/<topic dir>/partition=<p>/<start>-<end>.json   (the manifest)

A chunk holds every record a ``read_committed`` consumer reads at offsets ``start`` up to
``end`` (excluded; transaction markers and aborted records take offsets but hold no
record), with the columns of the file log's companions (``columnar``). Below the high
watermark Kafka never changes a record, except that retention removes the oldest ones (a
reader takes a chunk's records from the partition's first retained offset on), compaction
removes superseded ones (a compacted topic gets no companions) and a topic deleted and
created again under its name starts its offsets anew: the manifest holds the topic's id,
and a chunk of another id is never read. The manifest is written last and holds the
chunk's size and CRC-32, checked before every use, as for the file log's companions.

Everything here is plain Python (no Spark).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cdc.log.file.names import topic_dir_name

from .companions import JsonManifest, file_crc

FORMAT = 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """A range of one partition's offsets: ``start`` up to ``end`` (excluded)."""

    start: int
    end: int

    @property
    def stem(self) -> str:
        return f"{self.start:020d}-{self.end:020d}"


@dataclass(frozen=True, slots=True)
class ChunkManifest(JsonManifest):
    """What a chunk was read from, and what it is."""

    topic_id: str
    start: int
    end: int
    records: int
    companion_bytes: int
    companion_crc: int
    columns: tuple[str, ...]  # the row columns ``before``/``after`` hold
    format: int = FORMAT

    @classmethod
    def from_json(cls, data: bytes) -> ChunkManifest:
        """A manifest from its file; ``ValueError`` when it is not one."""
        try:
            raw = json.loads(data)
            return cls(str(raw["topic_id"]), int(raw["start"]), int(raw["end"]),
                       int(raw["records"]), int(raw["companion_bytes"]),
                       int(raw["companion_crc"]), tuple(str(c) for c in raw["columns"]),
                       int(raw["format"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a chunk manifest: {exc!r}") from None


def chunk_dir(root: Path | str, topic: str, partition: int) -> Path:
    """The directory of one partition's chunks."""
    return topic_root(root, topic) / f"partition={partition}"


def topic_root(root: Path | str, topic: str) -> Path:
    """The directory of one topic's chunks (a reader's ``basePath``)."""
    return Path(root) / topic_dir_name(topic)


def chunk_paths(root: Path | str, topic: str, partition: int,
                chunk: Chunk) -> tuple[Path, Path]:
    """``(parquet, manifest)`` of one chunk."""
    directory = chunk_dir(root, topic, partition)
    return directory / f"{chunk.stem}.parquet", directory / f"{chunk.stem}.json"


def list_chunks(root: Path | str, topic: str, partition: int) -> list[Chunk]:
    """Every chunk with any file (manifest or Parquet), by start offset."""
    try:
        names = os.listdir(chunk_dir(root, topic, partition))
    except FileNotFoundError:
        return []
    found = set()
    for name in names:
        start, dash, end = name.split(".", 1)[0].partition("-")
        if dash and start.isdigit() and end.isdigit():
            found.add(Chunk(int(start), int(end)))
    return sorted(found, key=lambda c: (c.start, c.end))


def check_chunk(root: Path | str, topic: str, partition: int, chunk: Chunk,
                topic_id: str) -> tuple[ChunkManifest | None, str]:
    """The chunk's manifest and ``""`` when it can be read for the topic with id
    ``topic_id``; else what is wrong (``"missing"``: no manifest)."""
    parquet, manifest_path = chunk_paths(root, topic, partition, chunk)
    try:
        data = manifest_path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    try:
        manifest = ChunkManifest.from_json(data)
    except ValueError as exc:
        return None, f"manifest {manifest_path} unreadable ({exc})"
    if manifest.format != FORMAT:
        return manifest, f"format {manifest.format}, this version reads {FORMAT}"
    if manifest.topic_id != topic_id:
        return manifest, (f"written from topic id {manifest.topic_id}, the topic is now "
                          f"{topic_id}: deleted and created again")
    try:
        size = parquet.stat().st_size
    except FileNotFoundError:
        return manifest, f"{parquet.name} is missing"
    if size != manifest.companion_bytes or file_crc(parquet) != manifest.companion_crc:
        return manifest, f"{parquet} is damaged (size or CRC-32 differs from its manifest)"
    return manifest, ""


def covering(chunks: Iterable[Chunk], start: int, end: int) -> tuple[list[Chunk], int]:
    """The chunks that hold the offsets from ``start`` on without a gap (each the one
    reaching furthest), and the offset where they stop holding them (``end`` at most)."""
    by_start = sorted(chunks, key=lambda c: (c.start, -c.end))
    taken: list[Chunk] = []
    position = start
    while position < end:
        best = max((c for c in by_start if c.start <= position < c.end),
                   key=lambda c: c.end, default=None)
        if best is None:
            break
        taken.append(best)
        position = best.end
    return taken, min(position, end)


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """What a read of a Kafka topic takes from chunks, and where Kafka takes over."""

    files: list[Path]
    columns: tuple[str, ...]  # every row column the chosen chunks hold
    resume: dict[int, int]  # partition → the first offset read from Kafka
    problems: list[str]  # chunks passed over, and why


def plan_chunks(root: Path | str, topic: str, topic_id: str,
                ranges: Mapping[int, tuple[int, int]]) -> ChunkPlan:
    """For each partition's ``(first offset wanted, end)`` in ``ranges``: the usable chunks
    that hold the offsets from the first on, and the offset after them."""
    files: list[Path] = []
    columns: dict[str, None] = {}
    resume: dict[int, int] = {}
    problems: list[str] = []
    for partition, (start, end) in sorted(ranges.items()):
        usable: dict[Chunk, ChunkManifest] = {}
        for chunk in list_chunks(root, topic, partition):
            if chunk.end <= start or chunk.start >= end:
                continue
            manifest, problem = check_chunk(root, topic, partition, chunk, topic_id)
            if manifest is not None and not problem:
                usable[chunk] = manifest
            elif problem != "missing":
                problems.append(f"partition {partition} offsets {chunk.start}-{chunk.end}: "
                                f"{problem}")
        taken, resume[partition] = covering(usable, start, end)
        for chunk in taken:
            files.append(chunk_paths(root, topic, partition, chunk)[0])
            columns.update(dict.fromkeys(usable[chunk].columns))
    return ChunkPlan(files, tuple(columns), resume, problems)
