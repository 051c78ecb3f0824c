"""`make airflow-ui` (python -m statekeeper.airflow_local) listens on loopback only and keeps its
home private: run it for real, read the listening sockets of its whole process tree from
/proc/net/tcp{,6}, and stat the files that hold secrets. A local-master Spark job submitted by the
operator keeps its driver and UI on loopback too, with the UI's kill links off."""
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
from pathlib import Path

import pytest

from tests.orchestration.support import plugin_module
from tests.plugins.loopback import free_port

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "::1"}


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


@pytest.mark.slow
def test_airflow_ui_binds_loopback_and_keeps_its_home_private(tmp_path):
    home = tmp_path / "airflow"
    port = free_port()
    env = dict(os.environ)
    # No nightly run starts Spark jobs while the sockets are inspected.
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    log_path = tmp_path / "airflow-ui.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "statekeeper.airflow_local", "--home", str(home),
                                 "--port", str(port)], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                health = _health(base)
                if all(health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "triggerer", "dag_processor")):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("airflow-ui did not become healthy:\n" + log_path.read_text()[-5000:])
            time.sleep(2)
        # Log servers would start with the scheduler/triggerer; give a late one time to bind.
        time.sleep(5)
        pids = _session_pids(proc.pid)
        listening = _listening(_socket_inodes(pids))
        assert ("127.0.0.1", port) in listening, listening
        exposed = [(a, p) for a, p in listening if a not in LOOPBACK]
        assert not exposed, f"listening beyond loopback: {exposed} (all: {listening})"

        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        for name in ("airflow.db", "airflow.cfg", "simple_auth_manager_passwords.json.generated", "fernet.key"):
            mode = stat.S_IMODE((home / name).stat().st_mode)
            assert mode == 0o600, f"{name} has mode {oct(mode)}"
    finally:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
    # SIGTERM to the launcher stops every component it started.
    deadline = time.monotonic() + 30
    while _session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(1)
    left = _session_pids(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"components left running after SIGTERM: {left}"


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
