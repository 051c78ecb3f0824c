"""spark-submit as the DAG's operator starts a job on a local master, for the benchmarks that time
jobs as the DAG runs them: its Spark settings, its environment and its JVM start-up settings
(plugins/statekeeper_airflow), taken from the checkout being measured."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _operators(checkout: Path):
    for path in (str(checkout / "include"), str(checkout / "plugins")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from statekeeper_airflow import operators

    return operators


def library_zip(checkout: Path, dest: Path) -> Path:
    """The --py-files zip of the checkout's library, made by the operator's own function."""
    return Path(_operators(checkout)._library_zip(str(dest)))


def dag_env(checkout: Path = REPO, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the operator gives spark-submit on a local master."""
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": str(checkout / "include"), "PATH": os.environ.get("PATH", ""),
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONDONTWRITEBYTECODE": "1",
           **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "STATEKEEPER_CACHE", "HOME")}}
    return {**env, **(extra or {})}


def _base_conf(operators, checkout: Path) -> dict[str, str]:
    if hasattr(operators, "job_conf"):
        return dict(operators.job_conf())
    log4j = checkout / "spark_jobs" / "log4j2.properties"  # checkouts from before job_conf()
    return {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
            "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
            "spark.ui.killEnabled": "false"}


@contextmanager
def dag_conf(checkout: Path = REPO, env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """The operator's Spark settings for a local master. On leaving the block, the JVM's
    class-data-sharing archive (written at exit by the first run) is published as the operator
    publishes it; call inside the block only the one spark-submit it is for."""
    operators = _operators(checkout)
    base = _base_conf(operators, checkout)
    if not hasattr(operators, "local_master_conf"):
        yield {**operators.LOCAL_DRIVER_CONF, **base}
        return
    conf = operators.local_master_conf(base, env or dag_env(checkout))
    conf, jvm = conf if isinstance(conf, tuple) else (conf, None)
    try:
        yield conf
        if jvm is not None:
            jvm.publish()
    finally:
        if jvm is not None:
            jvm.discard()
