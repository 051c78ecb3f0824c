"""The SparkSession a Statekeeper job runs in: Delta's jars, Python workers that import the library, UTC, the
calling thread's active session, and what tells a local master from a cluster.

Spark runs the jobs' Python functions (mapInArrow, UDFs) in separate Python worker processes, so the
`statekeeper` package must be importable there: either installed into the interpreter Spark uses,
shipped by spark-submit (`--py-files statekeeper.zip`, what the Airflow operator does: Spark puts
the archive on every executor's Python path itself), or put on PYTHONPATH before the JVM starts
(workers inherit the JVM's environment) and in `spark.executorEnv.PYTHONPATH` for executors that
see the same directory (local masters, a shared mount).

Stdlib only at import: the Airflow plugin imports `is_local_master` while DAGs are parsed.
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
        # (above): they can fork from statekeeper.launch.pyspark_daemon and import PySpark's bytecode.
        from statekeeper.launch.pyspark_daemon import LOCAL_WORKER_CONF

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


def activate(spark: Any) -> None:
    """Make `spark` the active session of the calling thread, JVM side included.

    From a new Python thread Spark otherwise resolves no active session on the JVM side.
    """
    from pyspark.sql import SparkSession

    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is not None:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(jvm_session)
    SparkSession._activeSession = spark  # type: ignore[attr-defined]
