"""When a columnar companion may stand in for its segment (``spark_pipelines.companions``),
and which requests the Parquet reader answers without an expression per row."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from spark_pipelines.columnar import case_clashes, companion_value_type, readable_as, row_names
from spark_pipelines.companions import (
    Manifest,
    SegmentStamp,
    check_companion,
    companion_bases,
    companion_paths,
    file_crc,
    remove_companion,
    sealed,
    segment_path,
    write_manifest,
)

TOPIC = "app.public.Orders"  # upper case: a hashed topic directory


def companion(root: Path, base: int, lines: bytes = b'{"a":1}\n{"a":2}\n') -> Manifest:
    segment = segment_path(root, TOPIC, 0, base)
    segment.parent.mkdir(parents=True, exist_ok=True)
    segment.write_bytes(lines)
    parquet, manifest_path = companion_paths(root, TOPIC, 0, base)
    parquet.parent.mkdir(parents=True, exist_ok=True)
    parquet.write_bytes(b"PAR1 columns PAR1")
    manifest = Manifest(SegmentStamp.of(segment), lines.count(b"\n"),
                        parquet.stat().st_size, file_crc(parquet), ("id", "note"))
    write_manifest(manifest_path, manifest)
    return manifest


def test_a_matching_companion_is_usable_and_its_manifest_round_trips(tmp_path: Path) -> None:
    written = companion(tmp_path, 0)
    verdict = check_companion(tmp_path, TOPIC, 0, 0)
    assert verdict.usable and verdict.manifest == written
    assert companion_paths(tmp_path, TOPIC, 0, 0)[0].parent.parent.name \
        == segment_path(tmp_path, TOPIC, 0, 0).parent.parent.name


def test_without_a_manifest_a_companion_is_missing(tmp_path: Path) -> None:
    companion(tmp_path, 0)
    companion_paths(tmp_path, TOPIC, 0, 0)[1].unlink()
    verdict = check_companion(tmp_path, TOPIC, 0, 0)
    assert not verdict.usable and verdict.problem == "missing"


@pytest.mark.parametrize("change, problem", [
    ("segment-appended", "the segment changed"),
    ("segment-rewritten", "the segment changed"),
    ("segment-deleted", "its segment is gone"),
    ("companion-damaged", "is damaged"),
    ("companion-deleted", "is missing"),
    ("manifest-garbage", "unreadable"),
])
def test_a_companion_that_does_not_match_its_segment_is_not_usable(
        tmp_path: Path, change: str, problem: str) -> None:
    companion(tmp_path, 0)
    segment = segment_path(tmp_path, TOPIC, 0, 0)
    parquet, manifest = companion_paths(tmp_path, TOPIC, 0, 0)
    if change == "segment-appended":
        segment.write_bytes(segment.read_bytes() + b'{"a":3}\n')
    elif change == "segment-rewritten":  # same size, other records (not a compaction)
        segment.write_bytes(b'{"a":7}\n{"a":8}\n')
    elif change == "segment-deleted":
        segment.unlink()
    elif change == "companion-damaged":
        data = bytearray(parquet.read_bytes())
        data[3] ^= 1
        parquet.write_bytes(bytes(data))
    elif change == "companion-deleted":
        parquet.unlink()
    else:
        manifest.write_bytes(b'{"segment": 1}')
    verdict = check_companion(tmp_path, TOPIC, 0, 0)
    assert not verdict.usable
    assert problem in verdict.problem


def test_companions_are_listed_and_removed_manifest_first(tmp_path: Path) -> None:
    companion(tmp_path, 0)
    companion(tmp_path, 2)
    assert companion_bases(tmp_path, TOPIC, 0) == [0, 2]
    remove_companion(tmp_path, TOPIC, 0, 0)
    assert companion_bases(tmp_path, TOPIC, 0) == [2]
    assert companion_bases(tmp_path, TOPIC, 1) == []


def test_only_segments_before_the_last_are_sealed() -> None:
    assert sealed([0, 10, 20]) == [0, 10]
    assert sealed([0]) == []
    assert sealed([]) == []


def test_the_reader_answers_a_subset_of_the_stored_event_directly() -> None:
    stored = companion_value_type(("id", "note"))
    row = StructType([StructField("id", StringType()), StructField("added", StringType())])
    materialize = StructType([StructField("op", StringType()), StructField("after", row),
                              StructField("unchanged", ArrayType(StringType())),
                              StructField("schema_version", LongType())])
    assert readable_as(stored, materialize)  # ``added``: a column no event here has
    commit_ts = StructType([StructField("source", StructType([
        StructField("commit_ts", StringType())]))])
    assert readable_as(stored, commit_ts)
    # a source field not kept, or a type to convert: not read directly
    assert not readable_as(stored, StructType([StructField("source", StructType([
        StructField("origin", StringType())]))]))
    assert not readable_as(stored, StructType([StructField("source", StructType([
        StructField("seq", LongType())]))]))
    assert not readable_as(stored, StringType())


def test_names_equal_but_for_case_are_found() -> None:
    assert case_clashes(("id", "Note", "note", "x", "note")) == ["Note/note"]
    assert case_clashes(("id", "note")) == []
    requested = StructType([StructField("after", StructType([StructField("ID", StringType())])),
                            StructField("op", StringType())])
    assert row_names(requested) == {"ID"}
    assert case_clashes(("id", *row_names(requested))) == ["id/ID"]
