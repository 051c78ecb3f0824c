"""The maintenance DAG's `compact` and `maintain_warehouse` tasks: off unless enabled, and what they pass
to compact_checkpoints.py and maintain_warehouse.py, rendered the way a worker does (tests/orchestration/support.render_task: the
Task SDK's RuntimeTaskInstance, real param validation, Variables as AIRFLOW_VAR_* environment variables).

* compaction: scheduled runs follow the Variable statekeeper_compact_enabled (off by default), manual
  runs the form; the form's snapshot, dry run and in-place apply to manual runs only;
* warehouse maintenance: scheduled runs on Sundays, manual runs on request; retention from a Variable;
* an operator whose `enabled` renders false skips (AirflowSkipException), submitting nothing.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from spark_jobs.compact_checkpoints import parser
from spark_jobs.maintain_warehouse import parser as maintain_parser
from tests.orchestration.support import render_task

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
SUNDAY = datetime(2026, 3, 1, 2, 0, 7, tzinfo=timezone.utc)
MONDAY = datetime(2026, 3, 2, 2, 0, 7, tzinfo=timezone.utc)
VARIABLES = ("statekeeper_compact_enabled", "statekeeper_compact_max_metadata_size", "statekeeper_warehouse_retention")


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.dags["checkpoint_maintenance"]


@pytest.fixture
def variables(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_STATEKEEPER_WAREHOUSE", "file:///var/warehouse")
    for name in VARIABLES:
        monkeypatch.delenv(f"AIRFLOW_VAR_{name.upper()}", raising=False)

    def set_(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", value)

    return set_


def _render(dag, task_id, run_type, conf=None, started=SUNDAY):
    return render_task(dag, task_id, run_type, conf, started=started)


def test_compaction_is_off_unless_enabled(dag, variables):
    assert _render(dag, "compact", "scheduled")["enabled"] == "False"
    assert _render(dag, "compact", "manual", {"warehouse": "/wh"})["enabled"] == "False"
    variables(statekeeper_compact_enabled="true")
    assert _render(dag, "compact", "scheduled")["enabled"] == "True"
    assert _render(dag, "compact", "backfill")["enabled"] == "True"
    # a manual run takes the form, not the Variable
    assert _render(dag, "compact", "manual", {"warehouse": "/wh"})["enabled"] == "False"
    assert _render(dag, "compact", "manual", {"warehouse": "/wh", "compact": True})["enabled"] == "True"


def test_compaction_arguments(dag, variables):
    args = list(_render(dag, "compact", "scheduled")["job_args"])
    assert args == ["--warehouse", "file:///var/warehouse", "--run-id", "scheduled__2026-03-01T02:00:00+00:00",
                    "--max-metadata-size=64MiB", "--snapshot=", "--dry-run=false", "--in-place=false"]
    ns = parser().parse_args(args)
    assert ns.max_metadata_size == 64 << 20 and not ns.dry_run and not ns.in_place and ns.snapshot == [""]
    conf = {"warehouse": "/wh", "compact": True, "compact_max_metadata_size": "512KiB", "compact_dry_run": True,
            "compact_in_place": True, "compact_snapshot": "file:///ck/job/chk-7"}
    manual = parser().parse_args(list(_render(dag, "compact", "manual", conf)["job_args"]))
    assert (manual.max_metadata_size, manual.dry_run, manual.in_place, manual.snapshot) == (
        512 << 10, True, True, ["file:///ck/job/chk-7"])
    # a scheduled run never takes a snapshot, a dry run or in place from conf
    variables(statekeeper_compact_max_metadata_size="1GiB")
    scheduled = parser().parse_args(list(_render(dag, "compact", "scheduled", conf)["job_args"]))
    assert (scheduled.max_metadata_size, scheduled.dry_run, scheduled.in_place, scheduled.snapshot) == (
        512 << 10, False, False, [""])


def test_warehouse_maintenance_is_weekly(dag, variables):
    assert _render(dag, "maintain_warehouse", "scheduled", started=SUNDAY)["enabled"] == "True"
    assert _render(dag, "maintain_warehouse", "scheduled", started=MONDAY)["enabled"] == "False"
    assert _render(dag, "maintain_warehouse", "manual", {"warehouse": "/wh"})["enabled"] == "False"
    assert _render(dag, "maintain_warehouse", "manual", {"warehouse": "/wh", "maintain_warehouse": True})[
        "enabled"] == "True"
    args = list(_render(dag, "maintain_warehouse", "scheduled")["job_args"])
    # its own entry point (maintain_warehouse.py), no longer compact_checkpoints.py --maintain-warehouse
    assert args[-1:] == ["--warehouse-retention=7d"] and "--maintain-warehouse" not in args
    variables(statekeeper_warehouse_retention="14d")
    ns = maintain_parser().parse_args(list(_render(dag, "maintain_warehouse", "scheduled")["job_args"]))
    assert not ns.dry_run and ns.warehouse_retention == "14d"


@pytest.mark.parametrize("value", [False, "False", "false", ""])
def test_a_disabled_step_is_skipped_without_submitting(value, tmp_path):
    from airflow.sdk.exceptions import AirflowSkipException
    from statekeeper_airflow.operators import StatekeeperSparkSubmitOperator

    op = StatekeeperSparkSubmitOperator(task_id="compact", job="compact_checkpoints", job_args=["--warehouse", "/wh"],
                                        enabled=value, skip_reason="compaction is off")
    with pytest.raises(AirflowSkipException, match="compaction is off"):
        op.execute({})
