"""Spark expressions and frame shapes the jobs share over Statekeeper's tables. The session itself (jars, workers,
UTC) is statekeeper.launch.session's.
"""
from __future__ import annotations

from typing import Any


def spark_schema(schema: Any) -> Any:
    """The Spark schema of an Arrow schema, zoned timestamps as Spark's TIMESTAMP (never NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def ascii_lower(column: Any) -> Any:
    """`column` with A-Z lowered and every other character as it is: the case rule of URI schemes, bucket,
    container and host names, which are ASCII. Not `lower()`: Spark 4's lower is collation-aware, and its
    first use in a JVM loads ICU (178 classes and their data), 0.9-1.0 s of CPU a fresh job pays for a
    guard over a few hundred rows."""
    from pyspark.sql import functions as F

    return F.translate(column, _UPPER, _UPPER.lower())


def bucket_of(job_dir: Any) -> Any:
    """Spark expression for `statekeeper.tables.catalog.job_bucket(job_dir)`: CRC-32 of the UTF-8
    name modulo JOB_BUCKETS, two digits."""
    from pyspark.sql import functions as F

    from statekeeper.tables.catalog import JOB_BUCKETS

    return F.lpad((F.crc32(F.col(job_dir).cast("binary")) % JOB_BUCKETS).cast("string"), 2, "0")


def bucketed(df: Any, spec: Any) -> Any:
    """`df` shaped for a table partitioned by (root_id, bucket): each row's bucket (re)computed from
    its job_dir, the spec's columns in order, one task per partition, rows sorted by job_dir so a
    per-job read of a bucket file filters contiguous rows."""
    shaped = df.withColumn("bucket", bucket_of("job_dir")).select(*spec.schema.names)
    return shaped.repartition(*spec.partition_by).sortWithinPartitions("job_dir")


def release_checkpoint(df: Any) -> None:
    """Drop a checkpointed frame's blocks now rather than when the JVM collects its RDD (a test
    session or a notebook runs many jobs in one driver)."""
    try:
        plan = df._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - best effort: the session may be gone
        pass
