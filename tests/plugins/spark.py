"""One shared local SparkSession for the whole test session.

`local[2]` (the machine has two cores), Spark UI off, few shuffle partitions, quiet log4j, a
modest driver heap, and Python workers that import this checkout's `statekeeper` (PYTHONPATH is
set before the JVM starts, see `statekeeper.launch.session.configure_builder`). Stopped at the end.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from statekeeper.launch.jvm_startup import C1_ONLY

_REPO = Path(__file__).resolve().parents[2]

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.py4j.name = py4j
logger.py4j.level = error
"""


def quiet_log4j(directory: Path) -> Path:
    path = directory / "log4j2.properties"
    path.write_text(_LOG4J, encoding="utf-8")
    return path


def build_local_session(work_dir: Path, *, app_name: str = "statekeeper-tests", cores: int = 2,
                        c1_only: bool = False):
    from pyspark.sql import SparkSession

    from statekeeper.launch.entrypoint import local_master_settings
    from statekeeper.launch.session import configure_builder

    log4j = quiet_log4j(work_dir)
    builder = (SparkSession.builder
               .master(f"local[{cores}]")
               .appName(app_name)
               .config("spark.ui.enabled", "false")
               # Loopback only, as the operator's local jobs: the session outlives the test that
               # started it, and test_airflow_local inspects every socket of this process tree.
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.default.parallelism", str(cores))
               # One session serves the whole suite (hundreds of jobs): keep only recent job and SQL
               # execution history, whose plan descriptions (with cached relations nested in them)
               # otherwise pile up in the driver's heap for the session's lifetime.
               .config("spark.driver.memory", "3g")
               # Delta keeps every table's log and snapshot it opened (up to 10,000 by default) for the session's
               # life: a suite's worth of tables in hundreds of temporary warehouses grew the heap until a late
               # module's broadcast found no room (a fresh-clone run, 2026-12-02). 64 serves any one test.
               .config("spark.databricks.delta.delta.log.cacheSize", "64")
               .config("spark.sql.ui.retainedExecutions", "20")
               .config("spark.ui.retainedJobs", "50")
               .config("spark.ui.retainedStages", "50")
               .config("spark.ui.retainedTasks", "1000")
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile=file:{log4j}" + (f" {C1_ONLY}" if c1_only else ""))
               .config("spark.sql.warehouse.dir", str(work_dir / "spark-warehouse"))
               .config("spark.local.dir", str(work_dir / "spark-local"))
               .config("spark.python.worker.reuse", "true"))
    # shuffles sized to the cores, as a step's own session on a local master gets them
    for key, value in local_master_settings({"spark.master": f"local[{cores}]"}, cores).items():
        builder = builder.config(key, value)
    session = configure_builder(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def job_process_env(*first_on_path: Path, **variables: str) -> dict[str, str]:
    """The environment of a job a test runs as its own process (`python spark_jobs/<job>.py --master
    local[N]`, mostly to SIGKILL it): this checkout importable (after `first_on_path`, e.g. the fault
    injector's sitecustomize), `variables` set, and the driver JVM compiling with C1 only, as the DAG's
    local tasks do (statekeeper.launch.jvm_startup). Such a process lives 10-60 s: measured on the crash test
    of the index (2 cores, 2 runs of 3 kills each), C1 took 25% off the CPU of each killed run
    (13 s against 16 s wall alone). The entry point itself keeps C2 for users' ad-hoc runs, which can
    be long; JAVA_TOOL_OPTIONS reaches its JVM without touching what the test runs."""
    path = [*map(str, first_on_path), str(_REPO / "include"), str(_REPO), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), JAVA_TOOL_OPTIONS=C1_ONLY,
                **variables)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # Both compilers (the JVM's default): every table write is a Delta transaction whose driver-side work
    # (analysis, snapshot, commit) repeats hundreds of times in this one session, and C2 pays for itself there.
    # Measured (2 cores, 40 replace-partition writes of one table in one session): 112 s with C1 only, 72 s
    # with both. C1 only had served the hand-made table path, whose small queries each generated new code.
    session = build_local_session(tmp_path_factory.mktemp("spark"))
    try:
        yield session
    finally:
        session.stop()


def kill_job_when(job: str, args: list[str], until: Callable[[], bool], *, cwd: Path, env: dict[str, str],
                  what: str, timeout: float = 600, poll: float = 0.3) -> Path:
    """Run `spark_jobs/<job>.py --master local[2] --progress-interval 2 *args` as its own process group (env:
    `job_process_env`), call `until()` every `poll` seconds while it runs, and SIGKILL the group as soon as it
    returns true; `until` may assert what must hold at every moment. Fails naming `what` (the moment waited for)
    after `timeout`, and with the job's log tail if it ends first. Returns the log: a file, since a pipe nobody
    reads blocks the job once 64 KiB of Spark's progress lines are unread."""
    import signal
    import subprocess
    import sys
    import time

    log = cwd / f"{job}-killed.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(_REPO / "spark_jobs" / f"{job}.py"), *args, "--master",
                                 "local[2]", "--progress-interval", "2"],
                                env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not until():
            assert proc.poll() is None, f"{job} ended before {what}:\n{log.read_text(errors='replace')[-3000:]}"
            if time.monotonic() > deadline:
                pytest.fail(f"{job}: {what} never happened within {timeout:.0f} s")
            time.sleep(poll)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return log
