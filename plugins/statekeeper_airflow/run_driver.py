"""A DAG run's shared Spark driver: the setup task that starts it and the teardown task that stops it.

Between them, every StatekeeperSparkSubmitOperator of the run on a local master runs its job in this
driver instead of a spark-submit of its own (statekeeper.launch.warm_driver): one JVM start-up per run, and
every job after the first finds the JIT warm. Neither task ever fails the run: without a driver each
task submits its own spark-submit, as before.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from statekeeper.launch.session import is_local_master
from statekeeper.launch.warm_driver.client import DriverClient
from statekeeper.launch.warm_driver.protocol import fingerprint, log_path, run_key, runtime_dir, socket_path
from statekeeper.launch.jvm_startup import ARCHIVE_MAP_OPTION, ARCHIVE_WRITE_OPTION, jobs_file, shared_driver_startup
from statekeeper_airflow.operators import _StatekeeperSubmit
from statekeeper_airflow.submission import (DRIVER_APPLICATION, driver_command, driver_submit_command,
                                            with_driver_java_option)

DEFAULT_IDLE_TIMEOUT_S = 600
DEFAULT_READY_TIMEOUT_S = 300
LOG_DAYS = 7   # drivers' own logs older than this are removed by the next teardown
_TAIL_LINES = 40


class StartRunDriverOperator(_StatekeeperSubmit):
    """Setup task: start the run's shared Spark driver with the settings the run's tasks submit with (pass
    it the same spark_conn_id, spark_master, storage connections and conf as them), and wait until it
    answers. A task whose settings differ is simply not run in it.

    :param idle_timeout_s: the driver exits after this long without a job, should the teardown not run.
    :param ready_timeout_s: how long to wait for the driver to answer before the run goes on without it.
    """

    def __init__(self, *, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S, **kwargs: Any) -> None:
        kwargs.setdefault("name", "statekeeper-driver")
        kwargs.setdefault("retries", 0)
        super().__init__(application=DRIVER_APPLICATION, **kwargs)
        self.idle_timeout_s = idle_timeout_s
        self.ready_timeout_s = ready_timeout_s

    def execute(self, context: Any) -> dict[str, Any] | None:
        # Without a driver every task submits its own: never fail the run.
        return _never_failing(self, context, self._start, "no shared Spark driver for this run",
                              "each task submits its own spark-submit")

    def _start(self, key: str) -> dict[str, Any] | None:
        directory = runtime_dir()
        path, log_file = socket_path(key, directory), log_path(key, directory)
        running = DriverClient(path).ping()
        if running is not None:   # a cleared and re-run setup: the run's driver is up already
            self.log.info("the run's Spark driver is already up (pid %s, %s job(s) run)", running["pid"],
                          running["jobs"])
            return {"socket": str(path), "pid": running["pid"], "log": str(log_file)}
        with self.prepared_submission() as sub:
            if not is_local_master(sub.master):
                self.log.info("master %s is not local: each task submits its own spark-submit", sub.master)
                return None
            submit = driver_submit_command(self._get_hook())
            digest = fingerprint(self.driver_settings(submit))
            # The task's own command (its archive mapped, if one exists), without the files of this submission:
            # the driver outlives this task's temporary directory. Until there is a pipeline archive, the driver
            # maps none and writes that one at its exit instead: it runs every step of the run, so its classes are
            # every job's. A small process of ours waits for its exit to publish it (statekeeper.launch.jvm_startup).
            env = {**os.environ, **(self.env_vars or {})}
            pipeline = shared_driver_startup(sub.jvm, env)
            dropped = (ARCHIVE_WRITE_OPTION,) if pipeline is None else (ARCHIVE_WRITE_OPTION, ARCHIVE_MAP_OPTION)
            launch = driver_command(submit, dropped, drop=("--py-files",))
            serve = [str(DRIVER_APPLICATION), "--socket", str(path), "--fingerprint", digest,
                     "--idle-timeout", str(self.idle_timeout_s)]
            if pipeline is None:
                command = [*launch, *serve]
            else:
                assert pipeline.pending is not None and pipeline.archive is not None
                command = [sys.executable, "-m", "statekeeper.launch.jvm_startup", "--pending", str(pipeline.pending),
                           "--archive", str(pipeline.archive), "--",
                           *with_driver_java_option(launch, pipeline.options), *serve,
                           "--jobs-file", str(jobs_file(pipeline.pending))]
                self.log.info("the run's Spark driver writes the class archive of its jobs at its exit: %s",
                              pipeline.archive)
            try:
                with open(log_file, "ab") as out:
                    os.chmod(log_file, 0o600)
                    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            except BaseException:
                if pipeline is not None:   # its claim would keep the next runs' drivers from writing the archive
                    pipeline.discard()
                raise
        started = time.monotonic()
        while time.monotonic() - started < self.ready_timeout_s:
            answer = DriverClient(path).ping()
            if answer is not None and answer.get("fingerprint") == digest:
                self.log.info("the run's Spark driver is up after %.1f s (pid %s); its log: %s",
                              time.monotonic() - started, answer["pid"], log_file)
                return {"socket": str(path), "pid": answer["pid"], "log": str(log_file)}
            if process.poll() is not None:
                self.log.warning("the run's Spark driver exited %s before it answered: each task submits its own "
                                 "spark-submit. The end of its log (%s):\n%s", process.returncode, log_file,
                                 _tail(log_file))
                return None
            time.sleep(0.5)
        self.log.warning("the run's Spark driver did not answer within %.0f s: stopping it; each task submits its own "
                         "spark-submit. The end of its log (%s):\n%s", self.ready_timeout_s, log_file, _tail(log_file))
        os.killpg(process.pid, signal.SIGTERM)
        return None


class StopRunDriverOperator(BaseOperator):
    """Teardown task: stop the run's shared Spark driver (after the job in progress, if any)."""

    def __init__(self, *, stop_timeout_s: float = 120.0, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.stop_timeout_s = stop_timeout_s

    def execute(self, context: Any) -> dict[str, Any] | None:
        # The driver also exits on its idle timeout: never fail the run.
        return _never_failing(self, context, self._stop, "could not stop the run's Spark driver",
                              "it exits after its idle timeout")

    def _stop(self, key: str) -> dict[str, Any] | None:
        directory = runtime_dir()
        _remove_old_logs(directory)
        client = DriverClient(socket_path(key, directory))
        answer = client.ping()
        if answer is None:
            self.log.info("no Spark driver of this run is running")
            return None
        if not client.stop(self.stop_timeout_s):
            self.log.warning("the run's Spark driver (pid %s) did not stop within %.0f s: terminating it",
                             answer["pid"], self.stop_timeout_s)
            try:
                os.kill(int(answer["pid"]), signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.log.info("stopped the run's Spark driver after %s job(s); its log: %s", answer["jobs"],
                      log_path(key, directory))
        return {"jobs": answer["jobs"]}


def _never_failing(task: BaseOperator, context: Any, action: Callable[[str], dict[str, Any] | None], failed: str,
                   then: str) -> dict[str, Any] | None:
    """`action` on the run's driver key; any error is logged as `failed` and what happens `then`, never raised."""
    ti = context["ti"]
    try:
        return action(run_key(ti.dag_id, ti.run_id))
    except Exception as exc:  # noqa: BLE001 - see the callers
        task.log.warning("%s (%s: %s); %s", failed, type(exc).__name__, exc, then)
        return None


def _tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _remove_old_logs(directory: Path) -> None:
    cutoff = time.time() - LOG_DAYS * 86400
    for log_file in directory.glob("*.log"):
        try:
            if log_file.stat().st_mtime < cutoff:
                log_file.unlink()
        except OSError:
            pass
