"""SparkSession plumbing: what every Statekeeper session needs (Delta's jars, Python workers that import the
library, UTC), and Spark expressions the jobs share.

Spark runs the jobs' Python functions (mapInArrow, UDFs) in separate Python worker processes, so the
`statekeeper` package must be importable there: either installed into the interpreter Spark uses,
shipped by spark-submit (`--py-files statekeeper.zip`, what the Airflow operator does: Spark puts
the archive on every executor's Python path itself), or put on PYTHONPATH before the JVM starts
(workers inherit the JVM's environment) and in `spark.executorEnv.PYTHONPATH` for executors that
see the same directory (local masters, a shared mount).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

def include_dir() -> str:
    """The directory that holds the `statekeeper` package being run (this checkout's include/)."""
    import statekeeper

    return str(Path(statekeeper.__file__).resolve().parent.parent)


def shipped() -> bool:
    """Whether `statekeeper` was imported from an archive, i.e. spark-submit shipped it (--py-files)."""
    return os.path.isfile(include_dir())


def worker_pythonpath() -> str:
    paths = [include_dir()]
    existing = os.environ.get("PYTHONPATH", "")
    paths += [p for p in existing.split(os.pathsep) if p and p not in paths]
    return os.pathsep.join(paths)


def prepare_environment() -> None:
    """Make Python workers import this checkout's `statekeeper` and use this interpreter.

    Must run before the JVM starts (before the first SparkSession/SparkContext in this process).
    """
    os.environ["PYTHONPATH"] = worker_pythonpath()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def configure_builder(builder: Any) -> Any:
    """Apply the settings every Statekeeper session needs to a `SparkSession.Builder`."""
    prepare_environment()
    if not shipped():
        # When the library came in a --py-files archive, Spark ships it to every executor; the
        # driver's PYTHONPATH (its temporary copy of the archive, the checkout's include/) names paths
        # of the driver's host, and spark.executorEnv.PYTHONPATH would replace the PYTHONPATH the
        # cluster's executors start with (a standalone worker's, an image's) instead of adding to it.
        builder = builder.config("spark.executorEnv.PYTHONPATH", worker_pythonpath())
    if starts_a_local_jvm(builder):
        # The JVM this process starts has the library first on the PYTHONPATH its local workers inherit
        # (above): they can fork from statekeeper.pyspark_daemon and import PySpark's bytecode.
        from statekeeper.pyspark_daemon import LOCAL_WORKER_CONF

        for key, value in LOCAL_WORKER_CONF.items():
            builder = builder.config(key, value)
    from statekeeper.launch.jars import spark_conf

    # Delta Lake's jars, extension and catalog: the table engine of every session (MissingJarsError if setup did
    # not install them). A session under spark-submit got them on its command line (the operator's conf).
    for key, value in spark_conf(dict(getattr(builder, "_options", {}))).items():
        builder = builder.config(key, value)
    return (builder
            .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
            # The jobs' mapInArrow functions and createDataFrame of Arrow tables; keep it explicit.
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC"))


def starts_a_local_jvm(builder: Any) -> bool:
    """Whether the session built from `builder` runs on a local master in a JVM this process starts
    (not under spark-submit, whose JVM, and its environment, already exist)."""
    return on_local_master(dict(getattr(builder, "_options", {}))) and not os.environ.get("PYSPARK_GATEWAY_PORT")


def deployment_conf(spark: Any) -> dict[str, str]:
    """What the deployment set for `spark` (spark-submit, spark-defaults.conf, the session's builder): keys a
    run must leave as they are. What a run set at runtime (spark.conf.set) is not in it."""
    return dict(spark.sparkContext.getConf().getAll())


def is_local_master(master: str) -> bool:
    """Whether a master URL is one of Spark's local masters (`local`, `local[N]`, `local[*]`, `local-cluster[...]`)."""
    return master.strip().startswith("local")


def on_local_master(conf: Mapping[str, str]) -> bool:
    return is_local_master(conf.get("spark.master", ""))


def spark_schema(schema: Any) -> Any:
    """The Spark schema of an Arrow schema, zoned timestamps as Spark's TIMESTAMP (never NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


def activate(spark: Any) -> None:
    """Make `spark` the active session of the calling thread, JVM side included.

    From a new Python thread Spark otherwise resolves no active session on the JVM side.
    """
    from pyspark.sql import SparkSession

    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is not None:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(jvm_session)
    SparkSession._activeSession = spark  # type: ignore[attr-defined]


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

