"""`make airflow-ui` (python -m statekeeper.dev.airflow_local) for real, on loopback, started once for
the module: the four Airflow components it runs (API server, scheduler, triggerer, DAG processor,
without the log servers that would bind every interface).

* It listens on loopback only and keeps its home private: the listening sockets of its whole
  process tree from /proc/net/tcp{,6}, and the modes of the files that hold secrets.
* The maintenance DAG triggered through the REST API with non-default params uses them. This is
  also the suite's end-to-end run of the maintenance DAG on the chain store as Flink wrote it (local
  storage), through a real scheduler and LocalExecutor: every task's XCom result, the index, chains
  and validation tables, the Data Docs and the run's report
  (tests/orchestration/test_dag_e2e.py keeps the damaged-store run, the cluster test the S3 run).
* SIGTERM to the launcher stops every component it started (the module's last test).
* A local-master Spark job submitted by the operator keeps its driver and UI on loopback too, with
  the UI's kill links off.

One launch serves the first three: starting Airflow costs most of a minute on two cores.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.orchestration.support import TASKS, check_chains_and_validation, plugin_module
from tests.plugins.loopback import free_port

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "::1"}


def _request(url: str, *, method: str = "GET", body: dict | None = None, token: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def _stats() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command name (index 1 = ppid, 3 = session)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out[int(entry)] = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return out


def _session_pids(sid: int) -> list[int]:
    return [pid for pid, fields in _stats().items() if int(fields[3]) == sid]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, fields in _stats().items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # exited meanwhile
            continue
    return inodes


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc/net/tcp6 prints four little-endian 32-bit words
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    text = socket.inet_ntop(socket.AF_INET6, words)
    return text[7:] if text.startswith("::ffff:") else text


def _listening(inodes: set[str]) -> list[tuple[str, int]]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A = LISTEN
                addr, port = cols[1].split(":")
                found.append((_address(addr), int(port, 16)))
    return found


def _health(base: str) -> dict:
    with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=10) as resp:
        return json.loads(resp.read())


def _health(base: str) -> dict:
    with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=10) as resp:
        return json.loads(resp.read())


@dataclass
class LocalAirflow:
    proc: subprocess.Popen
    home: Path
    port: int
    base: str
    work: Path
    token: str = ""
    stopped: bool = False

    def stop(self, timeout: float = 90) -> None:
        if self.stopped:
            return
        self.stopped = True
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def airflow_local(tmp_path_factory):
    work = tmp_path_factory.mktemp("airflow-local")
    home = work / "airflow"
    port = free_port()
    env = dict(os.environ)
    # Otherwise the scheduler starts the nightly run for the latest interval as soon as the DAG
    # appears, and max_active_runs=1 queues the triggered run behind it; and no nightly Spark job
    # opens sockets while they are inspected.
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    # The DAG files do not change while the module runs: parsed once at start, not again every 30 s (each parse
    # imports the DAGs, the provider and the plugin in a fork: CPU the other worker's tests need).
    env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] = "3600"
    # The Variables point at a warehouse the form's value must override.
    env["STATEKEEPER_WAREHOUSE"] = (work / "wh-from-variables").as_uri()
    log_path = work / "airflow-ui.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "statekeeper.dev.airflow_local", "--home", str(home),
                                 "--port", str(port)], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    af = LocalAirflow(proc, home, port, f"http://127.0.0.1:{port}", work)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                health = _health(af.base)
                if all(health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "triggerer", "dag_processor")):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("airflow-ui did not become healthy:\n" + log_path.read_text()[-5000:])
            time.sleep(2)
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        af.token = _request(f"{af.base}/auth/token", method="POST",
                            body={"username": "admin", "password": passwords["admin"]})["access_token"]
        yield af
    finally:
        af.stop()
        left = _session_pids(proc.pid)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_airflow_ui_binds_loopback_and_keeps_its_home_private(airflow_local):
    af = airflow_local
    # Log servers would start with the scheduler/triggerer; give a late one time to bind.
    time.sleep(5)
    listening = _listening(_socket_inodes(_session_pids(af.proc.pid)))
    assert ("127.0.0.1", af.port) in listening, listening
    exposed = [(a, p) for a, p in listening if a not in LOOPBACK]
    assert not exposed, f"listening beyond loopback: {exposed} (all: {listening})"

    assert stat.S_IMODE(af.home.stat().st_mode) == 0o700
    for name in ("airflow.db", "airflow.cfg", "simple_auth_manager_passwords.json.generated", "fernet.key"):
        mode = stat.S_IMODE((af.home / name).stat().st_mode)
        assert mode == 0o600, f"{name} has mode {oct(mode)}"


@pytest.mark.slow
def test_a_second_start_with_the_same_settings_skips_the_migration_and_the_imports(airflow_local):
    """The launcher stamped the home with its Airflow version and settings; a start with the same ones (a
    second `make demo`, `make airflow-ui` again) does not pay ~16 s of subprocesses for nothing."""
    from statekeeper.dev.airflow_local import local_airflow_env, prepare

    base = {**os.environ, "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "STATEKEEPER_WAREHOUSE": (airflow_local.work / "wh-from-variables").as_uri()}
    stamp = airflow_local.home / ".statekeeper-prepared"
    assert stamp.is_file() and stat.S_IMODE(stamp.stat().st_mode) == 0o600
    assert prepare(airflow_local.home, local_airflow_env(airflow_local.home, api_port=airflow_local.port,
                                                         base=base)) is False


@pytest.mark.slow
def test_each_dag_starts_paused_or_not_as_it_says(airflow_local):
    """The launcher unpauses a new DAG only where the DAG does not say: the maintenance DAG is ready to trigger, the
    DR copy and follow DAGs (they write to another store) start paused, as their is_paused_upon_creation says."""
    dags = _request(f"{airflow_local.base}/api/v2/dags", token=airflow_local.token)["dags"]
    paused = {d["dag_id"]: d["is_paused"] for d in dags}
    assert paused == {"checkpoint_maintenance": False, "checkpoint_dr_copy": True, "checkpoint_dr_follow": True}


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.flink
def test_trigger_with_params_through_rest(airflow_local, tmp_path, flink_store_for_airflow):
    base, token = airflow_local.base, airflow_local.token
    warehouse = tmp_path / "wh-from-form"
    conf = {"roots": flink_store_for_airflow.roots, "warehouse": str(warehouse), "job_filter": ""}
    run = _request(f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns", method="POST", token=token,
                   body={"logical_date": None, "conf": conf})
    run_id = run["dag_run_id"]
    deadline = time.monotonic() + 900
    while True:
        state = _request(f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}", token=token)["state"]
        if state in ("success", "failed"):
            break
        assert time.monotonic() < deadline, f"run {run_id} still {state}"
        time.sleep(3)
    tis = _request(f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}/taskInstances", token=token)
    # One try each: a retry would mean a first attempt failed (e.g. a template that cannot render).
    tries = {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in tis["task_instances"]}
    assert {t: tries.pop(t) for t in TASKS} == {t: ("success", 1) for t in TASKS}, tis
    # off unless enabled (the form's compact / maintain_warehouse, false by default): skipped, not failed
    # nothing failed, so run_outcome (which fails a run whose tasks failed) is skipped
    assert {t: state for t, (state, _) in tries.items()} == {"compact": "skipped", "maintain_warehouse": "skipped",
                                                             "run_outcome": "skipped", "spark_driver": "success",
                                                             "stop_spark_driver": "success"}, tis
    assert state == "success", _request(
        f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}/taskInstances", token=token)
    flink_store_for_airflow.check_index_run(warehouse, run_id)
    # The form's warehouse was used, not the Variable's.
    assert not (airflow_local.work / "wh-from-variables").exists()
    results = {t: _request(f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}/taskInstances/{t}"
                           "/xcomEntries/return_value", token=token)["value"] for t in TASKS}
    check_chains_and_validation(flink_store_for_airflow, str(warehouse), run_id, results)
    assert (warehouse / "_reports" / "validation" / "data_docs" / "index.html").is_file()
    # the last task wrote the run's report and pointed latest.json at it
    latest = json.loads((warehouse / "_reports" / "latest.json").read_text())
    assert latest["run_id"] == results["report"]["run_id"]
    assert Path(latest["page_uri"][len("file://"):]).is_file()
    # Each local task's JVM maps the class-data-sharing archive (the first one writes it). A refused
    # archive shows nowhere but this one line per task, and each task then starts a third slower.
    logs = list((airflow_local.work / "airflow" / "logs" / "dag_id=checkpoint_maintenance").rglob("*.log"))
    assert len(logs) >= len(TASKS), logs
    assert not [p for p in logs if "Unable to use shared archive" in p.read_text(errors="replace")], logs
    # Under a real scheduler every task is a process of its own: the driver the setup task started outlived
    # it, every step ran its job in it, and the teardown stopped it.
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    for entry_point in ("index_checkpoints", "compute_chains", "validate_checkpoints", "collect_garbage",
                        "build_report"):
        assert f"{entry_point} ran in the DAG run's Spark driver" in text, entry_point
    assert "stopped the run's Spark driver after 5 job(s)" in text

@pytest.mark.slow
def test_sigterm_stops_every_component(airflow_local):
    """Last of the module's tests on the launch: SIGTERM to the launcher stops what it started."""
    airflow_local.stop()
    deadline = time.monotonic() + 30
    while _session_pids(airflow_local.proc.pid) and time.monotonic() < deadline:
        time.sleep(1)
    left = _session_pids(airflow_local.proc.pid)
    assert not left, f"components left running after SIGTERM: {left}"
    assert airflow_local.proc.returncode is not None



def test_stopping_the_launcher_stops_what_each_component_started(tmp_path):
    """The stop reaches a component's own children, and kills those that ignore SIGTERM after the grace period:
    a component killed after the grace left its forked workers running, orphaned (seen once in a full run)."""
    script = tmp_path / "component"
    script.write_text("#!/bin/sh\n( trap '' TERM; sleep 300 ) &\n( trap '' TERM; sleep 300 ) &\nexec sleep 300\n")
    script.chmod(0o755)
    code = ("import sys; from statekeeper.dev.airflow_local import serve; "
            f"sys.exit(serve({{}}, grace_seconds=2, components=(('a',), ('b',)), program={str(script)!r}))")
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_session_pids(launcher.pid)) < 7:     # the launcher, two components, four children
            assert launcher.poll() is None and time.monotonic() < deadline, _session_pids(launcher.pid)
            time.sleep(0.1)
        os.kill(launcher.pid, signal.SIGTERM)
        assert launcher.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while _session_pids(launcher.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _session_pids(launcher.pid), "children of the components survived the stop"
    finally:
        if _session_pids(launcher.pid):
            os.killpg(launcher.pid, signal.SIGKILL)


PROBE = """
import json, sys, time
from pathlib import Path
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
out = Path(sys.argv[1])
conf = spark.sparkContext.getConf()
tmp = out.with_suffix(".tmp")
tmp.write_text(json.dumps({"ui": spark.sparkContext.uiWebUrl, "kill": conf.get("spark.ui.killEnabled", "true")}))
tmp.rename(out)
deadline = time.monotonic() + 180
while not out.with_suffix(".stop").exists() and time.monotonic() < deadline:
    time.sleep(0.2)
spark.stop()
"""


@pytest.mark.spark
def test_local_spark_job_binds_loopback_with_kill_links_off(tmp_path, monkeypatch):
    """The real operator submits a real local-master driver; its sockets are inspected while it runs."""
    import threading

    monkeypatch.setenv("AIRFLOW_CONN_SK_LOCAL_ONE", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    StatekeeperSparkSubmitOperator = plugin_module("operators").StatekeeperSparkSubmitOperator

    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    ready = tmp_path / "ready.json"
    op = StatekeeperSparkSubmitOperator(task_id="t_local_bind", job="index_checkpoints",
                                        spark_conn_id="sk_local_one", job_args=[str(ready)])
    op.application = str(probe)  # the operator's wiring, a driver that waits while we look
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute({})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert worker.is_alive() and time.monotonic() < deadline, f"driver never started: {errors}"
            time.sleep(0.5)
        info = json.loads(ready.read_text())
        listening = _listening(_socket_inodes(_descendants(os.getpid())))
    finally:
        ready.with_suffix(".stop").touch()
        worker.join(timeout=180)
    assert not errors, errors
    ui_port = int(info["ui"].rsplit(":", 1)[1])
    assert ("127.0.0.1", ui_port) in listening, (info, listening)
    exposed = [(a, p) for a, p in listening if a not in LOOPBACK]
    assert not exposed, f"Spark driver listening beyond loopback: {exposed} (all: {listening})"
    assert info["kill"] == "false"
