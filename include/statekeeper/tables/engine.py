"""Which table engine a job's session gets: Delta Lake's Spark integration (`DeltaSparkEngine`), the only one.

A session built by Statekeeper (statekeeper.launch.session.configure_builder, the operator's spark-submit) has Delta's
jars, extension and catalog (statekeeper.launch.jars); a session someone else built may not, and is refused here
with what to add rather than failing at the first table read.
"""
from __future__ import annotations

from typing import Any, Literal

from statekeeper.tables.delta_spark import DeltaSparkEngine
from statekeeper.tables.errors import EngineUnavailableError, TableError

EngineName = Literal["auto", "delta-spark"]
ENGINE_NAMES = ("auto", "delta-spark")
_DELTA_CLASS = "io.delta.tables.DeltaTable"
# What a session needs to run Delta: its SQL extension and its catalog (statekeeper.launch.jars puts both in every
# session Statekeeper starts, with the jars).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def delta_spark_available(spark: Any) -> bool:
    """True when Delta Lake's jars are on the classpath and its session extension is configured."""
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # noqa: BLE001 - Spark Connect sessions may refuse conf reads
        return False
    if DELTA_EXTENSION not in extensions:
        return False
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        jvm.java.lang.Class.forName(_DELTA_CLASS, False, jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError for ClassNotFoundException
        return False
    return True


def select_engine(spark: Any, requested: EngineName | str = "auto") -> DeltaSparkEngine:
    """The engine of `spark`'s jobs; EngineUnavailableError when the session lacks Delta Lake."""
    if requested not in ENGINE_NAMES:
        raise TableError(f"unknown table engine {requested!r}: {' or '.join(ENGINE_NAMES)} (delta-rs was removed: "
                         "every Spark job writes through delta-spark)")
    if not delta_spark_available(spark):
        raise EngineUnavailableError(
            "this Spark session has no Delta Lake: start it with the jars `python -m statekeeper.launch.jars --print` "
            f"names in spark.jars, {DELTA_EXTENSION} in spark.sql.extensions and "
            f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}; for spark-submit by hand, add the arguments "
            "`python -m statekeeper.launch.jars --submit-args` prints (Statekeeper's own sessions and the Airflow "
            "operator add them; run `make setup` if the jars are missing)")
    return DeltaSparkEngine()
