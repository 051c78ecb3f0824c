"""Spark's Python worker daemon, importing PySpark with the bytecode its installation compiled.

Spark starts every Python worker of an executor by forking one daemon (`pyspark.daemon`), and each
forked worker imports `pyspark.worker` and what a task needs after the fork. Those imports come from
`$SPARK_HOME/python/lib/pyspark.zip`, which is first on the workers' path, and Python keeps no
bytecode for a zip: the daemon and then every worker compiled PySpark's modules from source, 0.6 s
of CPU for `pyspark.worker` alone against 0.2 s from the installed package on the 2-core machine,
paid again by every worker a job starts. When SPARK_HOME is the installed `pyspark` package (a
pip-installed PySpark, a local master), this daemon drops the zips from its path before anything
imports PySpark, as a driver does (`statekeeper.launch.pyspark_path`); its forked workers inherit the path.
Anywhere else the path is left as it is and this is Spark's own daemon.

Chosen with `spark.python.daemon.module` (LOCAL_WORKER_CONF), and only where the library is on the
workers' path when Spark starts the daemon: a local master whose JVM has the library on its PYTHONPATH
(the operator's local submissions, local_master_conf; a session on a local master whose JVM this
process starts, statekeeper.launch.session.configure_builder: a job run as
`python spark_jobs/<job>.py --master local[N]`, the test session). A cluster's executors get the
--py-files archive on their path only when a task runs, so there the daemon could not be imported
("No module named 'statekeeper'") and Spark's own stays.
Spark passes the worker module as the first argument, which `pyspark.daemon` reads from `sys.argv`.
"""
from __future__ import annotations

LOCAL_WORKER_CONF = {"spark.python.daemon.module": "statekeeper.launch.pyspark_daemon"}


def main() -> None:
    from statekeeper.launch.pyspark_path import prefer_installed_pyspark

    prefer_installed_pyspark()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
