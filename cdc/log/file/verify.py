"""``cdc log verify``: check every record of every segment and report all problems."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .codec import RecordFormatError, decode_record
from .segments import INDEX_SUFFIX, list_segments, segment_name
from .topics import list_topics, partition_dir, read_meta


@dataclass(frozen=True, slots=True)
class VerifyProblem:
    """One problem found, with its place."""

    topic: str
    partition: int
    offset: int
    file: str
    position: int
    reason: str

    def __str__(self) -> str:
        return (f"{self.topic}[{self.partition}] offset {self.offset}: {self.reason} "
                f"({self.file} byte {self.position})")


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What a verification read: records and segments checked, problems found."""

    records: int
    segments: int
    problems: list[VerifyProblem]


def verify_log(root: Path) -> VerifyReport:
    """Read every record under ``root``; never stops at the first problem."""
    problems: list[VerifyProblem] = []
    records = segments = 0
    for topic in list_topics(root):
        meta = read_meta(root, topic)
        for partition in range(meta.partitions if meta else 0):
            directory = partition_dir(root, topic, partition)
            expected: int | None = None
            for base in list_segments(directory):
                segments += 1
                path = directory / segment_name(base)
                if expected is not None and base > expected and meta and not meta.compacted:
                    problems.append(VerifyProblem(
                        topic, partition, expected, str(path), 0,
                        f"offsets {expected}..{base - 1} missing: the segment before ends "
                        "early (truncated?)"))
                count, expected = _verify_segment(path, topic, partition, expected, problems)
                records += count
                if not path.with_suffix(INDEX_SUFFIX).exists():
                    problems.append(VerifyProblem(topic, partition, base, str(path), 0,
                                                  "index file missing (rebuilt on open)"))
    return VerifyReport(records, segments, problems)


def _verify_segment(path: Path, topic: str, partition: int, expected: int | None,
                    problems: list[VerifyProblem]) -> tuple[int, int | None]:
    data = path.read_bytes()
    base = int(path.name[:20])
    next_offset = base if expected is None else max(expected, base)
    count = pos = 0
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0:
            problems.append(VerifyProblem(topic, partition, next_offset, str(path), pos,
                                          "incomplete last record (torn write)"))
            break
        try:
            message = decode_record(data[pos:newline], topic, partition)
        except RecordFormatError as exc:
            problems.append(VerifyProblem(topic, partition, next_offset, str(path), pos,
                                          str(exc)))
            next_offset += 1
        else:
            if message.offset < next_offset:
                problems.append(VerifyProblem(topic, partition, message.offset, str(path), pos,
                                              f"offset goes backwards (expected ≥ "
                                              f"{next_offset})"))
            next_offset = message.offset + 1
            count += 1
        pos = newline + 1
    return count, next_offset
