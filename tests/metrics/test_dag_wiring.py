"""How the DAGs hand their last step the metrics settings: rendered as a worker renders them (the form, else the
Variables, else empty), the groups each DAG pushes, the form fields; and DAG parsing imports none of the push."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.orchestration.support import FakeSupervisor, render_task

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
STARTED = datetime(2026, 3, 1, 2, 30, 7, tzinfo=timezone.utc)
THRESHOLDS = ("index_age", "gc_age", "dr_rpo", "follow_refusals")


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag


@pytest.fixture
def variables(monkeypatch):
    values = {"statekeeper_warehouse": "file:///var/warehouse", "statekeeper_dr_warehouse": "file:///dr/warehouse",
              "statekeeper_metrics_conn_id": "statekeeper_pushgateway", "statekeeper_metrics_job": "flink-prod",
              "statekeeper_alert_index_age": "30h", "statekeeper_alert_dr_rpo": "15m",
              "statekeeper_dr_storage_conn_id": "dr_s3"}
    for name, value in values.items():
        monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", value)
    return values


def metrics(dag, task_id: str, run_type: str, conf: dict | None = None) -> dict:
    return render_task(dag, task_id, run_type, conf, started=STARTED, supervisor=FakeSupervisor())["metrics"]


def test_scheduled_maintenance_runs_push_with_the_variables(dagbag, variables):
    got = metrics(dagbag.dags["checkpoint_maintenance"], "report", "scheduled")
    assert got == {"conn_id": "statekeeper_pushgateway", "job": "flink-prod",
                   "thresholds": {"index_age": "30h", "gc_age": "", "dr_rpo": "15m", "follow_refusals": ""},
                   "groups": [{"scope": "maintenance", "warehouse": "file:///var/warehouse", "storage_conn_id": ""}]}
    # only the last step pushes
    assert [t.task_id for t in dagbag.dags["checkpoint_maintenance"].tasks if getattr(t, "metrics", None)] == ["report"]


def test_a_manual_run_takes_the_form(dagbag, variables):
    conf = {"metrics_conn_id": "other_gateway", "metrics_job": "staging", "alert_gc_age": "2d",
            "warehouse": "s3://bucket/wh", "storage_conn_id": "s3_conn"}
    got = metrics(dagbag.dags["checkpoint_maintenance"], "report", "manual", conf)
    assert got["conn_id"] == "other_gateway" and got["job"] == "staging"
    assert got["thresholds"]["gc_age"] == "2d" and got["thresholds"]["index_age"] == "30h"
    assert got["groups"] == [{"scope": "maintenance", "warehouse": "s3://bucket/wh", "storage_conn_id": "s3_conn"}]


def test_nothing_configured_renders_empty(dagbag, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_STATEKEEPER_WAREHOUSE", "file:///var/warehouse")
    got = metrics(dagbag.dags["checkpoint_maintenance"], "report", "scheduled")
    assert got["conn_id"] == "" and got["job"] == "" and set(got["thresholds"].values()) == {""}


def test_the_dr_dags_push_their_own_groups(dagbag, variables):
    copy = metrics(dagbag.dags["checkpoint_dr_copy"], "report", "asset_triggered")
    assert copy["groups"] == [
        {"scope": "dr_copy", "warehouse": "file:///var/warehouse", "storage_conn_id": ""},
        # the retention at the target: the DR warehouse, read with the DR store's connection
        {"scope": "maintenance", "warehouse": "file:///dr/warehouse", "storage_conn_id": "dr_s3"},
    ]
    follow = metrics(dagbag.dags["checkpoint_dr_follow"], "dr_follow", "scheduled")
    assert follow["groups"] == [{"scope": "dr_follow", "warehouse": "file:///var/warehouse", "storage_conn_id": ""}]
    assert follow["conn_id"] == "statekeeper_pushgateway" and follow["thresholds"]["dr_rpo"] == "15m"


def test_forms(dagbag):
    fields = {dag_id: set(dag.params) for dag_id, dag in dagbag.dags.items()}
    for dag_id, thresholds in {"checkpoint_maintenance": {"index_age", "gc_age"}, "checkpoint_dr_copy": {"dr_rpo"},
                               "checkpoint_dr_follow": {"dr_rpo", "follow_refusals"}}.items():
        dag = dagbag.dags[dag_id]
        assert {"metrics_conn_id", "metrics_job"} <= fields[dag_id]
        assert {f for f in fields[dag_id] if f.startswith("alert_")} == {f"alert_{t}" for t in thresholds}
        for name in ("metrics_conn_id", "metrics_job", *(f"alert_{t}" for t in thresholds)):
            param = dag.params.get_param(name)
            assert dag.params[name] == "" and param.description and param.schema["title"], (dag_id, name)
        assert "docs/metrics.md" in dag.doc_md


def test_dag_parsing_imports_none_of_the_push():
    code = ("import sys, importlib.util\n"
            "sys.path[:0] = ['plugins', 'include']\n"
            "for f in ('checkpoint_maintenance', 'checkpoint_dr_copy', 'checkpoint_dr_follow'):\n"
            "    spec = importlib.util.spec_from_file_location(f, f'dags/{f}.py')\n"
            "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('prometheus_client', 'deltalake')\n"
            "             or m.startswith(('statekeeper_airflow.metrics_push', 'statekeeper.metrics.'))\n"
            "             and m not in ('statekeeper.metrics.names', 'statekeeper.metrics.settings'))\n"
            "print(bad)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
