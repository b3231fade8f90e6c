"""Read the file event log with Spark's own JSON reader (no Python code per record).

Segments are JSON Lines under ``<log>/<topic dir>/partition=<p>/`` (the directory name
comes from ``cdc.log.file.topic_dir``: a topic with upper-case letters gets a hashed
name, so topics differing in case stay apart on any file system); the ``partition``
directory becomes a column by Spark's partition discovery. The schema is explicit: Spark
never infers it from the whole log.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdc.log.file import topic_dir


def record_schema(value_type: DataType | None = None) -> StructType:
    """The schema of one log line; ``value`` as raw JSON text unless a type is given."""
    return StructType([
        StructField("crc", StringType(), nullable=False),
        StructField("offset", LongType(), nullable=False),
        StructField("ts", LongType(), nullable=False),
        StructField("lsn", LongType(), nullable=False),
        StructField("seq", LongType(), nullable=False),
        StructField("del", BooleanType(), nullable=False),
        StructField("kl", LongType(), nullable=False),
        StructField("key", StringType(), nullable=True),
        StructField("value", value_type or StringType(), nullable=True),
    ])


def read_topic(spark: SparkSession, log_root: Path | str, topic: str,
               value_type: DataType | None = None) -> DataFrame:
    """A DataFrame of every record of ``topic``: the line's fields plus ``partition``.

    Lines that fail to parse are not dropped silently: ``mode=FAILFAST`` stops the job.
    """
    return (spark.read.schema(record_schema(value_type))
            .option("mode", "FAILFAST")
            .option("pathGlobFilter", "*.jsonl")
            .json(str(topic_dir(log_root, topic))))


RECORD_COLUMNS = ("partition", "offset", "lsn", "seq", "key", "value")


def record_columns(value_type: DataType) -> StructType:
    """The columns a job reads a topic as (``source.LogSource.read``): the partition, the
    offset, the source position, the key's JSON text and the value as ``value_type``."""
    return StructType([
        StructField("partition", IntegerType()), StructField("offset", LongType()),
        StructField("lsn", LongType()), StructField("seq", LongType()),
        StructField("key", StringType()), StructField("value", value_type)])
