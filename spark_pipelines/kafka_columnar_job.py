"""Write the columnar companions of a Kafka log's topics (``cdc log columnar`` when
``log.backend`` is kafka; layout and rules in ``kafka_companions``).

Each partition gets chunks of ``chunk_offsets`` offsets, one after the other from the
first offset Kafka still retains, while a whole chunk lies below the high watermark (the
rest stays on Kafka until it fills one). A chunk is read by Spark's Kafka source
(``read_committed``) with the value parsed as the file log's companions hold it, checked
(no event of a schema version the schema topic does not list yet) and moved into place,
its manifest last. Chunks that retention emptied, that are damaged, half-written, of a
topic since deleted and created again, or that lie past a gap, are removed (and, past the
gap, written again). A compacted topic gets none: Kafka removes records inside a chunk.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from .columnar import companion_value_type
from .columnar_job import TopicColumns, TopicCompanions, remove_leftovers, write_companion
from .kafka_companions import (
    Chunk,
    ChunkManifest,
    check_chunk,
    chunk_dir,
    chunk_paths,
    covering,
    list_chunks,
)
from .source import LogSource

DEFAULT_CHUNK_OFFSETS = 1_000_000


def write_chunks(spark: SparkSession, source: LogSource, root: Path, wanted: TopicColumns,
                 chunk_offsets: int = DEFAULT_CHUNK_OFFSETS) -> TopicCompanions:
    """One round for one topic (the caller holds ``companion_lock(root)``)."""
    started = time.perf_counter()
    report = TopicCompanions(wanted.topic)
    ranges = source.offset_ranges(wanted.topic)
    if not ranges:
        return report
    if "compact" in (_cleanup_policy(source, wanted.topic) or ""):
        report.waiting.append("cleanup.policy=compact: Kafka removes records inside chunks, "
                              "so the topic is read from Kafka only")
        return report
    topic_id = source.topic_id(wanted.topic)
    for partition, (first, end) in sorted(ranges.items()):
        directory = chunk_dir(root, wanted.topic, partition)
        remove_leftovers(directory)
        usable = []
        for chunk in list_chunks(root, wanted.topic, partition):
            manifest, problem = check_chunk(root, wanted.topic, partition, chunk, topic_id)
            if manifest is not None and not problem and chunk.end > first:
                usable.append(chunk)
            else:
                _remove_chunk(root, wanted.topic, partition, chunk)
                report.removed += 1
        taken, position = covering(usable, first, end)
        for chunk in set(usable) - set(taken):  # past a gap: written again in order
            _remove_chunk(root, wanted.topic, partition, chunk)
            report.removed += 1
        report.kept += len(taken)
        while end - position >= chunk_offsets:
            chunk = Chunk(position, position + chunk_offsets)
            directory.mkdir(parents=True, exist_ok=True)
            problem = _write_chunk(spark, source, root, wanted, partition, chunk, topic_id)
            if problem:
                report.waiting.append(f"partition {partition} offsets {chunk.start}-"
                                      f"{chunk.end}: {problem}")
                break
            report.written += 1
            position = chunk.end
    report.seconds = time.perf_counter() - started
    return report


def _write_chunk(spark: SparkSession, source: LogSource, root: Path, wanted: TopicColumns,
                 partition: int, chunk: Chunk, topic_id: str) -> str:
    """Write one chunk; ``""`` when done, else why it was not."""
    records = source.kafka_records(spark, wanted.topic, companion_value_type(wanted.columns),
                                   {partition: chunk.end}, {partition: chunk.start})
    parquet, manifest = chunk_paths(root, wanted.topic, partition, chunk)
    return write_companion(
        records.select("offset", "lsn", "seq", "key", "value"), parquet, manifest,
        chunk.stem, wanted.newest_version,
        f"{wanted.topic} partition {partition} offsets {chunk.start}-{chunk.end}",
        lambda count: "",  # Kafka is the only count there is
        lambda count, size, crc: ChunkManifest(topic_id, chunk.start, chunk.end, count, size,
                                               crc, wanted.columns))


def _cleanup_policy(source: LogSource, topic: str) -> str | None:
    with source.kafka_admin() as admin:
        return admin.topic_setting(topic, "cleanup.policy")


def _remove_chunk(root: Path, topic: str, partition: int, chunk: Chunk) -> None:
    parquet, manifest = chunk_paths(root, topic, partition, chunk)
    manifest.unlink(missing_ok=True)  # first: no reader trusts a half-removed chunk
    parquet.unlink(missing_ok=True)
