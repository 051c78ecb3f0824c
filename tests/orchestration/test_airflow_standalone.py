"""A real Airflow (api-server + scheduler via `airflow standalone`) on loopback: trigger the
maintenance DAG through the REST API with non-default params and check the run used them.

This is also the suite's end-to-end run of the maintenance DAG on the chain store as Flink wrote it
(local storage): beyond the form's values, it checks what `dag.test()` used to check for that store
(tests/orchestration/test_dag_e2e.py keeps the S3 and the damaged-store runs): every task's XCom
result, the index, chains and validation tables, the Data Docs and the run's report.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from statekeeper.airflow_local import airflow_bin, local_airflow_env, prepare
from tests.orchestration.support import TASKS, check_chains_and_validation
from tests.plugins.loopback import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.flink, pytest.mark.slow]


def _request(url: str, *, method: str = "GET", body: dict | None = None, token: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


@pytest.fixture
def standalone(tmp_path):
    home = tmp_path / "airflow"
    port = free_port()
    env = local_airflow_env(home, api_port=port)
    # Otherwise the scheduler starts the nightly run for the latest interval as soon as the DAG
    # appears (possibly before the API server listens), and max_active_runs=1 queues ours behind it.
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    # The Variables point at a warehouse the form's value must override.
    env["STATEKEEPER_WAREHOUSE"] = (tmp_path / "wh-from-variables").as_uri()
    prepare(home, env)
    log = open(tmp_path / "standalone.log", "wb")
    proc = subprocess.Popen([airflow_bin(), "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                health = _request(f"{base}/api/v2/monitor/health")
                if health.get("scheduler", {}).get("status") == "healthy":
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("airflow standalone did not become healthy:\n"
                                     + (tmp_path / "standalone.log").read_text()[-5000:])
            time.sleep(2)
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        token = _request(f"{base}/auth/token", method="POST",
                         body={"username": "admin", "password": passwords["admin"]})["access_token"]
        yield base, token
    finally:
        # SIGINT lets standalone stop its children; SIGTERM would leave them running. It did not exit within
        # 60 s in the suite's runs (the teardown took the whole minute), so the group is killed after 15 s:
        # every child is in it (start_new_session), and the Airflow home is the test's own.
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        log.close()


def test_trigger_with_params_through_rest(standalone, tmp_path, flink_store_for_airflow):
    base, token = standalone
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
                                                             "run_outcome": "skipped"}, tis
    assert state == "success", _request(
        f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}/taskInstances", token=token)
    flink_store_for_airflow.check_index_run(warehouse, run_id)
    # The form's warehouse was used, not the Variable's.
    assert not (tmp_path / "wh-from-variables").exists()
    results = {t: _request(f"{base}/api/v2/dags/checkpoint_maintenance/dagRuns/{run_id}/taskInstances/{t}"
                           "/xcomEntries/return_value", token=token)["value"] for t in TASKS}
    check_chains_and_validation(flink_store_for_airflow, str(warehouse), run_id, results)
    assert (warehouse / "_reports" / "validation" / "data_docs" / "index.html").is_file()
    # the last task wrote the run's report and pointed latest.json at it
    latest = json.loads((warehouse / "_reports" / "latest.json").read_text())
    assert latest["run_id"] == results["report"]["run_id"]
    assert Path(latest["page_uri"][len("file://"):]).is_file()
