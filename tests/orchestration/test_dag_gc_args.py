"""What the maintenance DAG's `gc` task passes to collect_garbage.py, rendered the way a worker does.

A task runner's RuntimeTaskInstance (the Task SDK's own class, as a worker builds it from the API
server's TIRunContext) renders the parsed DAG's `gc` task: the real param validation (a manual run's
conf merged into the form's defaults), the real `dag_run` model, Variables through the real accessor
(set as AIRFLOW_VAR_* environment variables, Airflow's environment secrets backend) and the DAG's
Jinja environment. Nothing is mocked; no metadata database is needed.

* a manual run takes the mode, grace period and retention policy from the form;
* scheduled and backfill runs take the mode and grace period from the Variables statekeeper_gc_mode
  (default plan) and statekeeper_gc_older_than (default 3d), whatever the form's defaults say;
* unset optional params render as `--option=` (empty: "not given"), never `--option=None`;
* --index-not-before is the DAG run's start;
* --roots-complete (ownerless job directories may be collected) is true only when a manual run's form says so.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.orchestration.support import render_task

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
STARTED = datetime(2026, 3, 1, 2, 0, 7, tzinfo=timezone.utc)
GC_VARIABLES = ("statekeeper_gc_mode", "statekeeper_gc_older_than")


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.dags["checkpoint_maintenance"]


@pytest.fixture
def variables(monkeypatch):
    """Set Airflow Variables for one test (None: unset); the warehouse Variable scheduled runs need."""
    monkeypatch.setenv("AIRFLOW_VAR_STATEKEEPER_WAREHOUSE", "file:///var/warehouse")
    for name in GC_VARIABLES:
        monkeypatch.delenv(f"AIRFLOW_VAR_{name.upper()}", raising=False)

    def set_(**values: str | None) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(f"AIRFLOW_VAR_{name.upper()}", raising=False)
            else:
                monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", value)

    return set_


def render_gc_args(dag, run_type: str, conf: dict | None = None) -> list[str]:
    """The gc task's job_args as a worker renders them for a run of `run_type` with `conf`."""
    return list(render_task(dag, "gc", run_type, conf, started=STARTED)["job_args"])


def options(args: list[str]) -> dict[str, str]:
    """`--name=value` arguments as {name: value}; every gc option is one token."""
    return dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)


def test_manual_run_takes_the_form(dag, variables):
    variables(statekeeper_gc_mode="plan", statekeeper_gc_older_than="7d")  # the form wins
    args = render_gc_args(dag, "manual", {"warehouse": "/wh", "gc_mode": "delete", "older_than": "2h",
                                          "retain_last": 3})
    assert args == [
        "--warehouse", "/wh",
        "--run-id", "manual__2026-03-01T02:00:00+00:00",
        "--index-not-before=2026-03-01T02:00:07+00:00",
        "--mode=delete",
        "--older-than=2h",
        "--retain-last=3",
        "--inactive-after=",
        "--inactive-retain=1",
        "--expire-savepoints-older-than=",
        "--max-deletes-per-second=",
        "--roots-complete=false",
        "--ownerless-older-than=",
    ]


def test_manual_run_policy_and_defaults(dag, variables):
    opts = options(render_gc_args(dag, "manual", {
        "warehouse": "/wh", "inactive_after": "30d", "inactive_retain": 2,
        "expire_savepoints_older_than": "90d", "max_deletes_per_second": 50,
    }))
    assert opts["mode"] == "plan"  # the form's default: a dry run
    assert opts["older-than"] == "3d"  # empty grace period, Variable unset
    assert (opts["inactive-after"], opts["inactive-retain"]) == ("30d", "2")
    assert opts["expire-savepoints-older-than"] == "90d"
    assert float(opts["max-deletes-per-second"]) == 50
    assert opts["retain-last"] == ""
    # an empty grace period in the form falls back to the Variable
    variables(statekeeper_gc_older_than="12h")
    assert options(render_gc_args(dag, "manual", {"warehouse": "/wh"}))["older-than"] == "12h"


def test_only_a_manual_run_declares_its_roots_complete(dag, variables):
    conf = {"warehouse": "/wh", "gc_roots_complete": True, "gc_ownerless_older_than": "90d"}
    opts = options(render_gc_args(dag, "manual", conf))
    assert (opts["roots-complete"], opts["ownerless-older-than"]) == ("true", "90d")
    assert options(render_gc_args(dag, "manual", {"warehouse": "/wh"}))["roots-complete"] == "false"
    # a schedule never declares it, whatever a conf says (ownerless directories stay held back)
    assert options(render_gc_args(dag, "scheduled", conf))["roots-complete"] == "false"


def test_manual_run_executes_a_reviewed_plan(dag, variables):
    args = render_gc_args(dag, "manual", {"warehouse": "/wh", "gc_mode": "delete",
                                          "gc_execute_plan": "gc-20260301T020000-ab12"})
    assert "--execute=gc-20260301T020000-ab12" in args
    assert not any(a.startswith("--mode") for a in args)  # --execute replaces --mode


@pytest.mark.parametrize("run_type", ["scheduled", "backfill"])
def test_scheduled_run_follows_the_variables(dag, variables, run_type):
    args = render_gc_args(dag, run_type)
    assert args == [
        "--warehouse", "file:///var/warehouse",
        "--run-id", f"{run_type}__2026-03-01T02:00:00+00:00",
        "--index-not-before=2026-03-01T02:00:07+00:00",
        "--mode=plan",
        "--older-than=3d",
        "--retain-last=",
        "--inactive-after=",
        "--inactive-retain=1",
        "--expire-savepoints-older-than=",
        "--max-deletes-per-second=",
        "--roots-complete=false",
        "--ownerless-older-than=",
    ]
    variables(statekeeper_gc_mode="delete", statekeeper_gc_older_than="5d")
    opts = options(render_gc_args(dag, run_type))
    assert (opts["mode"], opts["older-than"]) == ("delete", "5d")


def test_scheduled_run_ignores_form_values(dag, variables):
    """A run that is not manual never takes its mode, grace period or plan from conf (a backfill's
    --dag-run-conf, a TriggerDagRunOperator): deleting is switched on in the Variable only."""
    conf = {"gc_mode": "delete", "older_than": "1h", "gc_execute_plan": "gc-x"}
    for run_type in ("scheduled", "backfill", "operator_triggered"):
        args = render_gc_args(dag, run_type, conf)
        opts = options(args)
        assert (opts["mode"], opts["older-than"]) == ("plan", "3d"), (run_type, args)
        assert "execute" not in opts


def test_unset_options_render_empty_not_none(dag, variables):
    args = render_gc_args(dag, "manual", {"warehouse": "/wh"})
    assert all("None" not in a and "null" not in a for a in args), args
    assert all(a.strip() for a in args), args  # no empty tokens: every value is `--option=VALUE`
    opts = options(args)
    for name in ("retain-last", "inactive-after", "expire-savepoints-older-than", "max-deletes-per-second"):
        assert opts[name] == "", (name, args)
