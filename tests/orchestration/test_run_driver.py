"""A DAG run's shared Spark driver (statekeeper.launch.warm_driver; the setup/teardown operators of
statekeeper_airflow.run_driver).

* which tasks run in it: the setup task and a task with the same settings compute the same digest; one
  with another storage connection, Spark conf or master does not, and what names one submission alone
  (its name, library zip, class-archive file) does not count;
* the protocol, without Spark: a driver with no job exits after its idle timeout and removes its socket,
  stops when asked, survives a malformed request, declines other settings;
* a real driver under spark-submit, on a store written by real Flink: a job streams its log and exits as
  under its own spark-submit (result JSON included), a usage error exits 2 with argparse's message, a second
  task is declined while a job runs, and a task that goes away mid-job takes the driver with it (exit 143),
  after which tasks find none and submit their own.

The maintenance DAG end to end through the driver is tests/orchestration/test_dag_e2e.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from statekeeper.launch.jars import spark_conf, submit_args
from statekeeper.launch.warm_driver.client import Declined, DriverClient
from statekeeper.launch.warm_driver.protocol import fingerprint, run_key, socket_path
from statekeeper.launch.warm_driver.server import EXIT_TASK_GONE, Driver
from tests.orchestration.support import plugin_module

# Delta Lake's jars and settings, as the operator gives every submission
DELTA_CONF = spark_conf()
DELTA_ARGS = submit_args()

REPO = Path(__file__).resolve().parents[2]


# -- which tasks run in the driver ----------------------------------------------------------------

@pytest.fixture
def connections(monkeypatch):
    pytest.importorskip("airflow.providers.apache.spark")
    monkeypatch.setenv("AIRFLOW_CONN_SK_LOCAL2", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_SK_LOCAL1", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    for name, key in (("AIRFLOW_CONN_SK_STORE_A", "AKIASTOREA"), ("AIRFLOW_CONN_SK_STORE_B", "AKIASTOREB")):
        monkeypatch.setenv(name, json.dumps({"conn_type": "aws", "login": key, "password": "secret",
                                             "extra": {"endpoint_url": "http://127.0.0.1:9"}}))


def _settings(op) -> str:
    with op.prepared_submission():
        return fingerprint(op.driver_settings(plugin_module("submission").driver_submit_command(op._get_hook())))


@pytest.mark.airflow
def test_a_task_runs_in_the_driver_only_with_the_drivers_settings(connections):
    operators, run_driver = plugin_module("operators"), plugin_module("run_driver")
    job = operators.StatekeeperSparkSubmitOperator
    submit = {"spark_conn_id": "sk_local2", "storage_conn_id": "sk_store_a"}
    setup = _settings(run_driver.StartRunDriverOperator(task_id=f"d_{uuid.uuid4().hex[:6]}", **submit))
    # Every job of the run, with its own name, arguments, library zip and class-archive option.
    for entry_point, args in (("index_checkpoints", ["--warehouse", "/w", "--roots", "file:///r"]),
                              ("build_report", ["--warehouse", "/w"])):
        assert _settings(job(task_id=f"t_{uuid.uuid4().hex[:6]}", job=entry_point, job_args=args, **submit)) == setup
    others = {
        "another storage connection": {**submit, "storage_conn_id": "sk_store_b"},
        "a target store": {**submit, "target_storage_conn_id": "sk_store_b"},
        "another master": {**submit, "spark_conn_id": "sk_local1"},
        "a master override": {**submit, "spark_master": "local[1]"},
        "other Spark conf": {**submit, "conf": {"spark.sql.shuffle.partitions": "3"}},
        "other driver memory": {**submit, "driver_memory": "3g"},
    }
    for what, kwargs in others.items():
        assert _settings(job(task_id=f"t_{uuid.uuid4().hex[:6]}", job="compute_chains", **kwargs)) != setup, what


def test_driver_command_keeps_the_settings_and_drops_one_submissions_files():
    submission = plugin_module("submission")
    app = str(submission.DRIVER_APPLICATION)
    command = ["spark-submit", "--master", "local[2]", "--conf",
               "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:/l -XX:TieredStopAtLevel=1 "
               "-XX:ArchiveClassesAtExit=/c/.a.jsa.1.tmp", "--py-files", "/tmp/x/statekeeper.zip", "--name", "job",
               app, "--warehouse", "/w"]
    assert submission.driver_command(command, submission.SUBMISSION_JAVA_OPTIONS, drop=("--name", "--py-files")) == [
        "spark-submit", "--master", "local[2]", "--conf",
        "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:/l -XX:TieredStopAtLevel=1"]
    # The driver's own launch keeps a mapped archive and its name, never an archive written at exit.
    mapped = [*command[:4], command[4].replace("ArchiveClassesAtExit=/c/.a.jsa.1.tmp", "SharedArchiveFile=/c/a.jsa"),
              *command[5:]]
    assert submission.driver_command(mapped, (submission.ARCHIVE_WRITE_OPTION,), drop=("--py-files",))[4:] == [
        "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:/l -XX:TieredStopAtLevel=1 "
        "-XX:SharedArchiveFile=/c/a.jsa", "--name", "job"]
    # Until a pipeline archive exists, the driver maps none and writes one at its exit.
    launch = submission.driver_command(mapped, (submission.ARCHIVE_WRITE_OPTION, submission.ARCHIVE_MAP_OPTION),
                                      drop=("--py-files",))
    assert submission.with_driver_java_option(launch, "-XX:ArchiveClassesAtExit=/c/.p.jsa.2.tmp")[4] == (
        "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:/l -XX:TieredStopAtLevel=1 "
        "-XX:ArchiveClassesAtExit=/c/.p.jsa.2.tmp")
    assert submission.with_driver_java_option(["spark-submit"], "-XX:ArchiveClassesAtExit=/c/.p.jsa.2.tmp") == [
        "spark-submit", "--conf", "spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit=/c/.p.jsa.2.tmp"]


# -- the protocol, without Spark --------------------------------------------------------------------

@pytest.fixture
def driver_dir(tmp_path, monkeypatch):
    # A Unix socket path must stay under 108 bytes: pytest's tmp paths can be longer.
    directory = Path("/tmp") / f"sk-drv-{uuid.uuid4().hex[:8]}"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("STATEKEEPER_DRIVER_DIR", str(directory))
    yield directory
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()


def _serving(path: Path, idle_timeout_s: float = 60.0) -> threading.Thread:
    # No job reaches Spark in these tests, so the driver needs no session.
    driver = Driver(None, path, "digest", idle_timeout_s)
    thread = threading.Thread(target=driver.serve, daemon=True)
    thread.start()
    return thread


def test_an_idle_driver_exits_and_removes_its_socket(driver_dir):
    path = socket_path(run_key("dag", "run-1"))
    assert path.parent == driver_dir and oct(driver_dir.stat().st_mode & 0o777) == "0o700"
    thread = _serving(path, idle_timeout_s=0.5)
    assert (path.stat().st_mode & 0o777) == 0o600
    thread.join(timeout=10)
    assert not thread.is_alive() and not path.exists()
    assert DriverClient(path).ping() is None
    assert DriverClient(path).run("digest", "compute_chains", [], print) == Declined(path, "no driver is listening")


def test_a_driver_declines_other_settings_survives_garbage_and_stops_when_asked(driver_dir):
    path = socket_path(run_key("dag", "run-2"))
    thread = _serving(path)
    assert DriverClient(path).ping() == {"pid": os.getpid(), "fingerprint": "digest", "jobs": 0, "busy": False}
    lines: list[str] = []
    assert DriverClient(path).run("other", "compute_chains", ["--warehouse", "/nowhere"], lines.append) == \
        Declined(path, "settings")
    assert lines == []
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        conn.sendall(b"not json\n")
        assert conn.recv(100) == b""      # closed on it, nothing run
    assert DriverClient(path).ping()["jobs"] == 0
    assert DriverClient(path).stop(wait_s=10)
    thread.join(timeout=10)
    assert not thread.is_alive() and not path.exists()


def test_a_private_directory_is_required(tmp_path, monkeypatch):
    from statekeeper.launch.warm_driver.protocol import runtime_dir

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("STATEKEEPER_DRIVER_DIR", str(shared))
    with pytest.raises(PermissionError, match="chmod 700"):
        runtime_dir()


# -- a real driver under spark-submit ---------------------------------------------------------------

def _launched(command: list[str], env: dict[str, str], log: Path, path: Path) -> subprocess.Popen:
    """A real driver started as `command`, once it answers on `path` (its output in `log`)."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while DriverClient(path).ping() is None:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError(log.read_text()[-3000:])
        time.sleep(0.3)
    return process


@pytest.mark.spark
@pytest.mark.flink
def test_jobs_in_a_real_driver_busy_and_a_task_gone(driver_dir, flink_store_for_airflow, tmp_path):
    roots = ",".join(flink_store_for_airflow.roots)
    path = socket_path(run_key("dag", "run-3"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    log = tmp_path / "driver.log"
    process = _launched(
        [str(Path(sys.executable).with_name("spark-submit")), "--master", "local[2]", *DELTA_ARGS,
         "--conf", f"spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 "
                   f"-Dlog4j2.configurationFile=file:{REPO / 'spark_jobs' / 'log4j2.properties'}",
         str(REPO / "spark_jobs" / "spark_driver.py"), "--socket", str(path), "--fingerprint", "digest",
         "--idle-timeout", "300"], env, log, path)
    try:
        # A usage error: argparse's own message, exit 2, as from the job's spark-submit.
        lines: list[str] = []
        assert DriverClient(path).run("digest", "compute_chains", ["--bogus"], lines.append) == 2
        assert any("the following arguments are required: --warehouse" in line for line in lines), lines

        # A job, while a second task asks: declined as busy (that task submits its own), nothing else changes.
        warehouse, result = tmp_path / "warehouse", tmp_path / "result.json"
        lines, outcome = [], {}
        index = threading.Thread(target=lambda: outcome.update(code=DriverClient(path).run(
            "digest", "index_checkpoints", ["--roots", roots, "--warehouse", str(warehouse),
                                            "--run-id", "driver-run", "--result-json", str(result)],
            lines.append)))
        index.start()
        while not (DriverClient(path).ping() or {}).get("busy"):
            assert index.is_alive(), lines
            time.sleep(0.1)
        assert DriverClient(path).run("digest", "compute_chains", ["--warehouse", str(warehouse)], print) == \
            Declined(path, "busy")
        index.join(timeout=300)
        assert outcome["code"] == 0, lines
        assert any(line.startswith("index run ") and " succeeded " in line for line in lines), lines
        assert json.loads(result.read_text())["status"] == "succeeded"
        flink_store_for_airflow.check_index_run(warehouse, "driver-run")

        # The task of the next job goes away after its first line: the driver goes with it, as a killed
        # spark-submit would, and the next task finds none.
        client, first = DriverClient(path), threading.Event()

        def chains() -> None:
            try:
                client.run("digest", "compute_chains", ["--warehouse", str(warehouse)], lambda line: first.set())
            except Exception:  # noqa: BLE001 - the connection is closed under it
                pass

        runner = threading.Thread(target=chains)
        runner.start()
        assert first.wait(timeout=120), log.read_text()[-3000:]
        client.close()
        assert process.wait(timeout=60) == EXIT_TASK_GONE, log.read_text()[-3000:]
        runner.join(timeout=10)
        assert "went away before the job finished" in log.read_text()
        assert isinstance(DriverClient(path).run("digest", "compute_chains", [], print), Declined)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_pipeline_archive_is_published_only_after_a_normal_exit_of_a_driver_that_ran_enough_jobs(tmp_path):
    from statekeeper.launch import jvm_startup as js

    archive = tmp_path / "spark-driver-k-pipeline.jsa"

    def driver(code: int, jobs: int | None, body: bytes = bytes.fromhex("a8ab0bf0") + b"classes") -> int:
        """A stand-in for the driver's spark-submit: writes what its JVM and server would, exits `code`."""
        startup = js.JvmStartup("", pending=tmp_path / f".{archive.name}.1.tmp", archive=archive)
        script = (f"open({str(startup.pending)!r}, 'wb').write({body!r})\n"
                  + (f"open({str(js.jobs_file(startup.pending))!r}, 'w').write('{jobs}')\n" if jobs is not None else "")
                  + f"raise SystemExit({code})")
        return js.run_and_publish([sys.executable, "-c", script], startup, min_jobs=3)

    assert driver(143, 5) == 143 and not archive.exists()   # killed with its task: a partial archive, maybe
    assert driver(0, 2) == 0 and not archive.exists()       # too few jobs to stand for every job's classes
    assert driver(0, None) == 0 and not archive.exists()    # it never said how many
    assert driver(0, 3, b"\0" * 8) == 0 and not archive.exists()   # not a dynamic archive
    assert driver(0, 3) == 0 and archive.read_bytes().endswith(b"classes")
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]   # no private file left behind


@pytest.mark.spark
@pytest.mark.flink
def test_a_driver_writes_the_pipeline_archive_at_its_exit_and_local_drivers_map_it(driver_dir, flink_store_for_airflow,
                                                                                   tmp_path):
    from statekeeper.launch import jvm_startup as js

    cache_env = {**os.environ, "STATEKEEPER_CACHE": str(tmp_path / "cache")}
    archive = js.pipeline_archive(js.archive_for(DELTA_CONF, cache_env))
    first = js.local_startup(DELTA_CONF, cache_env)   # no archive yet: a local job would write the job archive
    pipeline = js.shared_driver_startup(first, cache_env)
    assert pipeline is not None and pipeline.archive == archive and pipeline.pending is not None
    path = socket_path(run_key("dag", "run-archive"))
    env = {**cache_env, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    java = f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{REPO / 'spark_jobs' / 'log4j2.properties'}"
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    log = tmp_path / "driver.log"
    # as the run's setup task starts it (run_driver.StartRunDriverOperator)
    process = _launched(
        [sys.executable, "-m", "statekeeper.launch.jvm_startup", "--pending", str(pipeline.pending), "--archive",
         str(archive), "--min-jobs", "1", "--",
         spark_submit, "--master", "local[2]", *DELTA_ARGS,
         "--conf", f"spark.driver.extraJavaOptions={java} {pipeline.options}",
         str(REPO / "spark_jobs" / "spark_driver.py"), "--socket", str(path), "--fingerprint", "digest",
         "--idle-timeout", "300", "--jobs-file", str(js.jobs_file(pipeline.pending))], env, log, path)
    try:
        warehouse = tmp_path / "warehouse"
        lines: list[str] = []
        index = ["--roots", ",".join(flink_store_for_airflow.roots), "--warehouse", str(warehouse)]
        assert DriverClient(path).run("digest", "index_checkpoints", index, lines.append) == 0, lines
        assert DriverClient(path).stop()
        assert process.wait(timeout=180) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with open(archive, "rb") as f:
        assert int.from_bytes(f.read(4), "little") == 0xF00BABA8, log.read_text()[-3000:]
    assert not [p for p in archive.parent.iterdir() if p.name.endswith(".tmp")]   # the private files are gone

    # Every local driver maps it from now on (a job's first run no longer writes an archive of its own), and the
    # next shared driver writes none.
    after = js.local_startup(DELTA_CONF, cache_env)
    assert after.pending is None and f"{js.ARCHIVE_MAP_OPTION}{archive}" in after.options
    assert js.mapped_archive_option(DELTA_CONF, cache_env) == f"{js.ARCHIVE_MAP_OPTION}{archive}"
    assert js.shared_driver_startup(after, cache_env) is None
    # A real JVM maps it: with -Xshare:on a JVM that cannot use its archive does not start.
    done = subprocess.run(
        [spark_submit, "--master", "local[1]", *DELTA_ARGS, "--conf",
         f"spark.driver.extraJavaOptions={java} -Xshare:on {js.ARCHIVE_MAP_OPTION}{archive}",
         str(REPO / "spark_jobs" / "index_checkpoints.py"), "--roots", ",".join(flink_store_for_airflow.roots),
         "--warehouse", str(warehouse)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
