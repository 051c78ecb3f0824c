"""What a Statekeeper spark-submit carries besides its job's arguments: the settings every submission has
(`job_conf`), the deployment's Java options kept (`with_deployment_java_options`), a local driver's loopback, heap and
JVM start-up (`local_master_conf`), its environment (`driver_env`), the library shipped as a zip with its bytecode
(`library_zip`), the shared driver's command (`driver_command`), and spark-submit's exit code read from the
provider's exception (`spark_submit_exit_code`). The operators (statekeeper_airflow.operators) and the benchmarks
(bench/_submit.py) submit with these.
"""
from __future__ import annotations

import importlib.util
import logging
import marshal
import os
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
# Absolute, not relative: Airflow's plugin manager also loads these files as top-level modules.
from statekeeper.launch.jvm_startup import (ARCHIVE_MAP_OPTION, ARCHIVE_WRITE_OPTION, JvmStartup, local_heap_conf,
                                            local_network, local_startup, with_java_options, without_options)
from statekeeper.launch.pyspark_daemon import LOCAL_WORKER_CONF

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPARK_JOBS = PROJECT_ROOT / "spark_jobs"
LIBRARY = PROJECT_ROOT / "include"
LOG4J = SPARK_JOBS / "log4j2.properties"


# A DAG run's shared driver (statekeeper.launch.warm_driver), started by its setup task.
DRIVER_APPLICATION = SPARK_JOBS / "spark_driver.py"


# Java options that name one submission's own files (its class archive), not the driver's settings.
SUBMISSION_JAVA_OPTIONS = (ARCHIVE_WRITE_OPTION, ARCHIVE_MAP_OPTION)


# The provider's SparkSubmitHook.submit() reports a failed spark-submit only as
# AirflowException("Cannot execute: <cmd>. Error code is: <N>.[ Kubernetes ...][\nLast spark-submit output: ...]").
SPARK_SUBMIT_TAIL = "\nLast spark-submit output:"
SPARK_SUBMIT_CODE = re.compile(r"Error code is: (-?\d+)")


def local_master_conf(conf: dict[str, str], environ: dict[str, str] | None = None, *,
                      deployment: dict[str, str] | None = None,
                      driver_memory: str | None = None) -> tuple[dict[str, str], JvmStartup]:
    """`conf` (the task's, which wins) completed with what a driver on a local master needs: its RPC server and
    block manager on loopback and the UI's kill links off unless the task or the deployment chose otherwise
    (statekeeper.launch.jvm_startup.local_network; its `env`, the UI's address, goes into the driver's environment), a
    heap sized to the machine (statekeeper.launch.jvm_startup.local_driver_memory) unless the task (`driver_memory`, its
    conf) or the deployment (`deployment`: its properties file or spark-defaults.conf; SPARK_DRIVER_MEMORY in
    `environ`, which spark-submit reads after both) chose one, and the JVM start-up settings of
    statekeeper.launch.jvm_startup (whose archive the caller publishes after the JVM exited)."""
    # Local workers inherit PYTHONPATH with the library (driver_env): they import PySpark's bytecode.
    out = {**LOCAL_WORKER_CONF, **local_network(conf, environ, deployment=deployment).conf, **conf}
    if not driver_memory:
        out.update(local_heap_conf(out, environ, deployment=deployment))
    startup = local_startup(out, environ)
    if startup.options:
        out["spark.driver.extraJavaOptions"] = with_java_options(out, startup.options)
    return out, startup


def job_conf() -> dict[str, str]:
    """The Spark settings every Statekeeper submission carries (the benchmarks submit with them too)."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
        # Anyone who reaches the UI (no authentication by default) could kill the job's stages.
        "spark.ui.killEnabled": "false",
    }


JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def with_deployment_java_options(conf: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """`conf` whose Java options, where they are still job_conf()'s own, come after the deployment's
    (`defaults`: what spark-submit would load from the properties file or spark-defaults.conf).
    A `--conf` replaces the file's value of the same key, so without this every submission would
    silently drop a cluster's own extraJavaOptions (agents, heap dumps, trust stores); a task that
    sets its own Java options keeps exactly those, as with plain spark-submit."""
    ours = job_conf()
    out = dict(conf)
    for key in JAVA_OPTION_KEYS:
        site = defaults.get(key, "").strip()
        if site and out.get(key) == ours[key]:
            out[key] = f"{site} {ours[key]}"
    return out


@dataclass
class Submission:
    """What one execute() prepared for spark-submit; everything under `tmp_dir` is removed afterwards."""

    tmp_dir: Path
    result_file: Path
    master: str
    # Storage variables for the spark-submit process environment (never argv).
    process_env: dict[str, str] = field(default_factory=dict)
    # The 0600 properties file carrying them to a cluster-mode driver (YARN/Kubernetes only).
    properties_file: Path | None = None
    # A local driver's start-up settings; the class-data-sharing archive its JVM writes at exit.
    jvm: JvmStartup | None = None


def library_zip(dest_dir: str) -> str:
    """Zip include/statekeeper so cluster executors import the same code as the driver.

    Each module goes in twice: its source (tracebacks, importlib.resources) and its bytecode beside it,
    which zipimport takes first. Python never writes bytecode into a zip, so without it the driver and
    every forked Python worker compiled each module it imported, in every job: in a DR run on the sample
    store, ~0.5 s of the driver's CPU and ~1.3 s of its workers'. Compiling all of them here costs ~0.3 s.
    The bytecode is hash-based and unchecked: it was compiled from the source next to it in the same
    zip, so there is nothing to check; an interpreter of another version rejects its magic number and
    zipimport compiles the source as before."""
    path = os.path.join(dest_dir, "statekeeper.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in (LIBRARY / "statekeeper").rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                arcname = file.relative_to(LIBRARY).as_posix()
                zf.write(file, arcname)
                if file.suffix == ".py":
                    zf.writestr(arcname + "c", _bytecode(file.read_bytes(), f"{path}/{arcname}"))
    return path


def _bytecode(source: bytes, filename: str) -> bytes:
    """An unchecked hash-based .pyc of `source` (PEP 552): magic, flags, source hash, marshalled code."""
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = 0b01    # hash-based; check_source (0b10) unset
    return (importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source)
            + marshal.dumps(code))


def driver_submit_command(hook: SparkSubmitHook) -> list[str]:
    """The spark-submit command `hook` would run for the shared driver, without the hook's log line of it
    (a task that runs its job in the driver would otherwise log a spark-submit it never ran)."""
    own = hook.__dict__.get("_log")
    hook._log = _QUIET
    try:
        return hook._build_spark_submit_command(str(DRIVER_APPLICATION))
    finally:
        hook._log = own


_QUIET = logging.getLogger("statekeeper_airflow.driver_command")
_QUIET.setLevel(logging.WARNING)


def driver_command(command: Sequence[str], java_options: Sequence[str], drop: Sequence[str] = ()) -> list[str]:
    """A spark-submit `command` of the shared driver up to its application, without the options in `drop`
    (and their values) and without the Java options starting with one of `java_options`."""
    out: list[str] = []
    args = iter(command)
    for arg in args:
        if arg == str(DRIVER_APPLICATION):
            break
        if arg in drop:
            next(args, None)
            continue
        key, sep, value = arg.partition("=")
        out.append(f"{key}={without_options(value, java_options)}" if sep and key in JAVA_OPTION_KEYS
                   else arg)
    return out


def with_driver_java_option(command: Sequence[str], option: str) -> list[str]:
    """A spark-submit `command` (up to its application) whose driver's Java options end with `option`."""
    key = "spark.driver.extraJavaOptions"
    out = list(command)
    for i, arg in enumerate(out):
        if i and out[i - 1] == "--conf" and arg.startswith(f"{key}="):
            out[i] = f"{key}={with_java_options({key: arg[len(key) + 1:]}, option)}"
            return out
    return [*out, "--conf", f"{key}={option}"]


def driver_env() -> dict[str, str]:
    """What spark-submit's driver and executors need of this process's environment: the venv's Python
    (same library on both sides), the library on the path, Java, the caches."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(LIBRARY), os.environ.get("PYTHONPATH", "")])),
        "PATH": os.environ.get("PATH", ""),
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "STATEKEEPER_CACHE", "HOME")},
    }


def spark_submit_exit_code(exc: BaseException) -> int | None:
    """spark-submit's exit code from the exception the provider's hook raised, None if it is not
    about a spark-submit exit.

    The hook keeps the process (and so its return code) only in a private attribute, which a
    provider upgrade may rename; the exception it raises is its one public report of the exit, and
    its message carries the code. The command precedes the code and the process's last output lines
    follow it, so the last match before that output is the hook's own. Should the format ever
    change, the code is None and the task is retried (never failed for good by mistake);
    tests/orchestration/test_operator_exit_codes.py runs a real failing spark-submit through the hook to catch that.
    """
    head = str(exc).split(SPARK_SUBMIT_TAIL, 1)[0]
    codes = SPARK_SUBMIT_CODE.findall(head)
    return int(codes[-1]) if codes else None
