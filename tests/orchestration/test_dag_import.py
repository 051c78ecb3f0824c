"""The project's DAGs import cleanly and declare what the UI form and the scheduler need (the DR copy
DAG's own checks are in test_dag_dr_copy.py)."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dags) == {"checkpoint_maintenance", "checkpoint_dr_copy", "checkpoint_dr_follow"}


def test_maintenance_dag_shape(dagbag):
    dag = dagbag.dags["checkpoint_maintenance"]
    assert dag.max_active_runs == 1
    assert dag.schedule == "0 2 * * *" or str(dag.timetable.summary) == "0 2 * * *"
    assert dag.doc_md and "index" in dag.doc_md
    jobs = {"index": "index_checkpoints.py", "chains": "compute_chains.py", "validate": "validate_checkpoints.py",
            "gc": "collect_garbage.py", "compact": "compact_checkpoints.py",
            "maintain_warehouse": "maintain_warehouse.py", "report": "build_report.py"}
    assert {t.task_id for t in dag.tasks} == set(jobs) | {"run_outcome", "spark_driver", "stop_spark_driver"}
    # one Spark driver for the run (statekeeper.launch.warm_driver): started before the first step, stopped after the
    # last whatever happened, and never part of the run's outcome
    driver, stop_driver = dag.get_task("spark_driver"), dag.get_task("stop_spark_driver")
    assert driver.is_setup and stop_driver.is_teardown and driver.downstream_task_ids == {"index", "stop_spark_driver"}
    assert stop_driver.upstream_task_ids == {"report", "spark_driver"} and stop_driver.trigger_rule == "all_done_setup_success"
    assert not stop_driver.on_failure_fail_dagrun and driver.retries == 0 and stop_driver.retries == 0
    for task_id, application in jobs.items():
        task = dag.get_task(task_id)
        assert task.pool == "statekeeper_spark"
        assert task.retries >= 1 and task.retry_exponential_backoff
        assert task.retry_delay == timedelta(minutes=2)
        assert task.doc_md
        assert Path(task.application).name == application
    # chains reads what index wrote; validate reads both
    assert dag.get_task("chains").upstream_task_ids == {"index"}
    assert dag.get_task("validate").upstream_task_ids == {"chains"}
    # gc plans from the index and chains tables, and only after validation passed: a run whose newest
    # checkpoint does not restore (validate exits 1) deletes nothing. Never beside compaction, which
    # writes snapshots into the roots: after it, and a disabled (skipped) compaction does not hold it
    # back while a failed one does (none_failed)
    gc = dag.get_task("gc")
    assert gc.upstream_task_ids == {"compact"} and gc.downstream_task_ids == {"maintain_warehouse", "run_outcome"}
    assert gc.trigger_rule == "none_failed"
    # compaction, when enabled, also only after validation passed; warehouse maintenance after both,
    # unless something upstream failed (and then the run still ends failed: see test_dag_e2e)
    assert dag.get_task("compact").upstream_task_ids == {"validate"}
    assert dag.get_task("compact").trigger_rule == "all_success"
    maintain = dag.get_task("maintain_warehouse")
    assert maintain.upstream_task_ids == {"gc"}
    assert maintain.trigger_rule == "none_failed_min_one_success"
    # the report comes last whatever happened before it, and run_outcome keeps a failed run failed
    # (a successful report as the only leaf would mark it successful)
    report = dag.get_task("report")
    assert report.upstream_task_ids == {"maintain_warehouse"} and report.trigger_rule == "all_done"
    outcome = dag.get_task("run_outcome")
    assert outcome.upstream_task_ids == set(jobs) and outcome.trigger_rule == "one_failed"
    assert outcome.retries == 0 and {t.task_id for t in dag.leaves if not t.is_teardown} == {"run_outcome"}
    # validate may stat referenced files under the roots; every job writes to the same warehouse
    for task_id in jobs:
        args = dag.get_task(task_id).job_args
        assert "--warehouse" in args and "--run-id" in args, (task_id, args)
    assert "--roots" in dag.get_task("validate").job_args
    # an unrestorable checkpoint is an answer, not a transient failure; a partial listing may be
    assert dag.get_task("validate").final_exit_codes == (1, 2)
    assert dag.get_task("index").final_exit_codes == (2,)
    # gc's 1 (blocked by a fail-closed rule, or some deletes failed) is an answer too; 3 resumes
    assert dag.get_task("gc").final_exit_codes == (1, 2)


def test_params_form(dagbag):
    dag = dagbag.dags["checkpoint_maintenance"]
    schema = {k: dag.params.get_param(k).schema for k in dag.params}
    described = {k: dag.params.get_param(k).description for k in dag.params}
    assert schema["roots"]["type"] == "array" and schema["roots"]["items"] == {"type": "string"}
    for key in ("job_filter", "warehouse", "storage_conn_id", "spark_conn_id", "spark_master"):
        assert schema[key]["type"] == "string", key
        assert described[key], key
    assert dag.params["spark_conn_id"] == "spark_local"
    assert dag.params["roots"] == []
    # gc: a dry run unless asked; unset policy options are null or empty, not a value
    assert schema["gc_mode"]["enum"] == ["plan", "delete"] and dag.params["gc_mode"] == "plan"
    for key in ("older_than", "inactive_after", "expire_savepoints_older_than", "gc_execute_plan"):
        assert schema[key]["type"] == "string" and dag.params[key] == "", key
    assert schema["retain_last"]["type"] == ["null", "integer"] and dag.params["retain_last"] is None
    assert schema["max_deletes_per_second"]["type"] == ["null", "number"] and dag.params["max_deletes_per_second"] is None
    assert schema["inactive_retain"]["type"] == "integer" and dag.params["inactive_retain"] == 1
    for key in ("gc_mode", "gc_execute_plan", "older_than", "retain_last", "inactive_after", "inactive_retain",
                "expire_savepoints_older_than", "max_deletes_per_second"):
        assert described[key], key


# The DR copy DAG runs the index, chains and gc jobs again, on the DR store, under task ids of its own.
TARGET_TASKS = {"target_index": "index", "target_chains": "chains", "target_gc": "gc"}
# A job run with other arguments under a task id of its own: the DR copy in follow mode (its own DAG).
OTHER_TASKS: dict[str, str] = {"dr_follow": "dr_copy"}


def test_tasks_follow_the_job_registry(dagbag):
    """Task ids, entry points and exit-code handling are the registry's, and every registered job runs
    in one of the DAGs under its own name."""
    from statekeeper.jobs import registry
    from statekeeper_airflow.operators import StatekeeperSparkSubmitOperator

    entry_points = {spec.entry_point for spec in registry.JOBS}
    named: dict[str, str] = {}
    for dag in dagbag.dags.values():
        # DagBag imports the plugin under the same name, so isinstance sees the DAG's own class. The other
        # tasks are run_outcome, which submits nothing (it keeps a failed run failed), and the run's shared
        # Spark driver's setup and teardown.
        submits = [t for t in dag.tasks if isinstance(t, StatekeeperSparkSubmitOperator)]
        others = {"run_outcome", "spark_driver", "stop_spark_driver"}
        assert submits == [t for t in dag.tasks if t.task_id not in others], (dag.dag_id, [type(t) for t in dag.tasks])
        for task in submits:
            assert task.job in entry_points, (task.task_id, task.job)
            spec = registry.job(task.job)
            assert task.task_id in (spec.name, f"target_{spec.name}") or OTHER_TASKS.get(task.task_id) == spec.name, \
                (dag.dag_id, task.task_id)
            assert {**TARGET_TASKS, **OTHER_TASKS}.get(task.task_id, task.task_id) == spec.name
            assert task.spec == spec
            assert task.final_exit_codes == spec.final_exit_codes
            assert Path(task.application) == ROOT / "spark_jobs" / f"{spec.entry_point}.py"
            # The report ends both the maintenance and the DR copy DAG (each rewrites the source warehouse's page).
            if task.task_id == spec.name and spec is not registry.REPORT:
                assert task.task_id not in named, f"{task.task_id} runs in {named.get(task.task_id)} and {dag.dag_id}"
                named[task.task_id] = dag.dag_id
            elif task.task_id == spec.name:
                named.setdefault(task.task_id, dag.dag_id)
    for spec in registry.JOBS:
        assert spec.name in named, f"no DAG runs {spec.name}"
        assert (ROOT / "spark_jobs" / f"{spec.entry_point}.py").is_file(), spec.entry_point
    assert named[registry.DR.name] == "checkpoint_dr_copy"


# Parsing happens in every scheduler and DAG processor loop: what the DAG files and the plugin import then is paid on
# each parse, and is all a scheduler host needs installed. The storage layer (boto3, the GCS and Azure SDKs), the
# tables (pyarrow, delta-rs) and Spark are the jobs' business.
_PARSE_AND_REPORT = """
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
before = set(sys.modules)
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"errors": {str(k): str(v) for k, v in bag.import_errors.items()},
                  "dags": sorted(bag.dags), "modules": sorted(set(sys.modules) - before)}))
"""
_NOT_AT_PARSE = ("pyarrow", "pyspark", "py4j", "deltalake", "pandas", "boto3", "botocore", "google.cloud", "azure",
                 "great_expectations", "statekeeper.storage.", "statekeeper.tables", "statekeeper.format",
                 "statekeeper.jobs", "statekeeper.launch.entrypoint", "statekeeper.launch.warm_driver.server")


def test_parsing_the_dags_imports_no_storage_table_or_spark_module(tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", _PARSE_AND_REPORT, str(ROOT / "dags")], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["errors"] == {} and len(report["dags"]) == 3, report
    heavy = [m for m in report["modules"] if m == "statekeeper.storage" or m.startswith(_NOT_AT_PARSE)]
    assert heavy == [], heavy
    # what it does import of the library: the plugin's own needs (names, settings, the launch plumbing's light parts)
    assert "statekeeper.launch.session" in report["modules"] and "statekeeper_airflow.operators" in report["modules"]
