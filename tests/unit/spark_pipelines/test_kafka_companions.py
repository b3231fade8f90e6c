"""Which chunks of a Kafka log's companions a read takes, and when one is trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_pipelines.companions import file_crc, write_manifest
from spark_pipelines.kafka_companions import (
    Chunk,
    ChunkManifest,
    check_chunk,
    chunk_paths,
    covering,
    list_chunks,
    plan_chunks,
)

TOPIC = "App.public.Orders"  # upper case: a hashed directory name
TOPIC_ID = "Zq1bQ2x9S0uWm3kHcYtV4g"


def written(root: Path, partition: int, chunk: Chunk, *, topic_id: str = TOPIC_ID,
            manifest: bool = True) -> Path:
    parquet, manifest_path = chunk_paths(root, TOPIC, partition, chunk)
    parquet.parent.mkdir(parents=True, exist_ok=True)
    parquet.write_bytes(f"parquet {chunk.stem}".encode())
    if manifest:
        write_manifest(manifest_path, ChunkManifest(
            topic_id, chunk.start, chunk.end, chunk.end - chunk.start,
            parquet.stat().st_size, file_crc(parquet), ("id", f"c{chunk.start}")))
    return parquet


@pytest.mark.parametrize(("chunks", "start", "end", "taken", "resume"), [
    ([], 0, 10, [], 0),
    ([(0, 5), (5, 10)], 0, 10, [(0, 5), (5, 10)], 10),
    ([(0, 5), (5, 10)], 7, 9, [(5, 10)], 9),
    ([(0, 5), (6, 10)], 0, 10, [(0, 5)], 5),  # a gap: Kafka from 5
    ([(0, 5), (0, 8), (5, 10)], 0, 20, [(0, 8), (5, 10)], 10),  # the furthest first
    ([(3, 5)], 0, 10, [], 0),  # nothing holds offset 0
    ([(0, 5)], 5, 10, [], 5),
])
def test_covering_takes_the_chunks_without_a_gap(
        chunks: list[tuple[int, int]], start: int, end: int, taken: list[tuple[int, int]],
        resume: int) -> None:
    got, position = covering([Chunk(*c) for c in chunks], start, end)
    assert [(c.start, c.end) for c in got] == taken
    assert position == resume


def test_manifest_round_trips_and_refuses_other_json() -> None:
    manifest = ChunkManifest(TOPIC_ID, 10, 20, 9, 1234, 99, ("id", "odd name"))
    assert ChunkManifest.from_json(manifest.to_json()) == manifest
    with pytest.raises(ValueError, match="not a chunk manifest"):
        ChunkManifest.from_json(b'{"start": 1}')


def test_check_names_each_reason_a_chunk_is_not_read(tmp_path: Path) -> None:
    good, other, torn, damaged = Chunk(0, 5), Chunk(5, 10), Chunk(10, 15), Chunk(15, 20)
    written(tmp_path, 0, good)
    written(tmp_path, 0, other, topic_id="another-id")
    written(tmp_path, 0, torn, manifest=False)
    parquet = written(tmp_path, 0, damaged)
    parquet.write_bytes(parquet.read_bytes()[::-1])
    assert list_chunks(tmp_path, TOPIC, 0) == [good, other, torn, damaged]
    assert check_chunk(tmp_path, TOPIC, 0, good, TOPIC_ID)[1] == ""
    assert "deleted and created again" in check_chunk(tmp_path, TOPIC, 0, other, TOPIC_ID)[1]
    assert check_chunk(tmp_path, TOPIC, 0, torn, TOPIC_ID) == (None, "missing")
    assert "is damaged" in check_chunk(tmp_path, TOPIC, 0, damaged, TOPIC_ID)[1]
    chunk_paths(tmp_path, TOPIC, 0, good)[0].unlink()
    assert "is missing" in check_chunk(tmp_path, TOPIC, 0, good, TOPIC_ID)[1]


def test_plan_reads_chunks_up_to_the_first_unusable_one_then_kafka(tmp_path: Path) -> None:
    for chunk in (Chunk(0, 100), Chunk(100, 200), Chunk(300, 400)):
        written(tmp_path, 0, chunk)
    written(tmp_path, 0, Chunk(200, 300), topic_id="another-id")
    written(tmp_path, 1, Chunk(0, 50))
    written(tmp_path, 1, Chunk(50, 100), manifest=False)  # a writer killed on the way
    chosen = plan_chunks(tmp_path, TOPIC, TOPIC_ID,
                         {0: (120, 450), 1: (0, 80), 2: (0, 30)})
    assert chosen.files == [chunk_paths(tmp_path, TOPIC, 0, Chunk(100, 200))[0],
                            chunk_paths(tmp_path, TOPIC, 1, Chunk(0, 50))[0]]
    assert chosen.resume == {0: 200, 1: 50, 2: 0}
    assert chosen.columns == ("id", "c100", "c0")
    assert len(chosen.problems) == 1 and "offsets 200-300" in chosen.problems[0]
    past_retention = plan_chunks(tmp_path, TOPIC, TOPIC_ID, {0: (400, 450)})
    assert past_retention.files == [] and past_retention.resume == {0: 400}
