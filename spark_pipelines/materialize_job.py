"""``python -m spark_pipelines.materialize_job -c pipeline.yaml``: every captured table's
current state as Parquet under ``spark.output_path/<schema>.<table>`` (file log).

Each table's row type comes from its newest schema version in the ``<prefix>._schemas``
topic: integers become longs, booleans booleans, floats doubles, everything else the
event's text (numeric digits, ISO timestamps, JSON).
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdc.config.commands import config_option, load_config_or_exit

from .log_source import read_topic
from .materialize import materialize_table

_TYPES: dict[str, DataType] = {"int2": LongType(), "int4": LongType(), "int8": LongType(),
                               "bool": BooleanType(), "float4": DoubleType(),
                               "float8": DoubleType()}


def row_schema_from_log(spark: SparkSession, log_root: Path | str, topic_prefix: str,
                        table: str) -> StructType:
    """The row type of ``table`` (``schema.table``) at its newest schema version."""
    records = read_topic(spark, log_root, f"{topic_prefix}._schemas").select("value").collect()
    versions = [orjson.loads(r["value"]) for r in records]
    mine = [v for v in versions if f"{v['schema']}.{v['table']}" == table]
    if not mine:
        raise click.ClickException(f"no schema of {table} in {topic_prefix}._schemas yet")
    newest = max(mine, key=lambda v: int(v["schema_version"]))
    return StructType([StructField(c["name"], _TYPES.get(str(c["type"]).rsplit(".", 1)[-1],
                                                         StringType()))
                       for c in newest["columns"]])


@click.command()
@config_option
@click.option("--table", "tables", multiple=True, help="schema.table (default: source.tables)")
def main(config_path: Path, tables: tuple[str, ...]) -> None:
    """Materialize tables from the log as Parquet.

    Example: python -m spark_pipelines.materialize_job -c pipeline.yaml --table public.orders
    """
    config = load_config_or_exit(config_path)
    if config.log.backend != "file" or config.log.path is None:
        raise click.UsageError("this job reads the file log (log.backend: file)")
    builder = SparkSession.builder.master(config.spark.master).appName("materialize")
    for key, value in config.spark.conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    try:
        for table in tables or config.source.tables:
            schema, name = table.split(".", 1)
            frame = materialize_table(spark, config.log.path, config.topic_for(schema, name),
                                      row_schema_from_log(spark, config.log.path,
                                                          config.topic_prefix, table))
            target = config.spark.output_path / table
            frame.write.mode("overwrite").parquet(str(target))
            click.echo(f"{table}: {spark.read.parquet(str(target)).count()} rows -> {target}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
