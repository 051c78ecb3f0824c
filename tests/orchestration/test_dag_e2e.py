"""The maintenance DAG end to end with dag.test(): real Airflow (SQLite), real Spark on local[2] (the run's
one shared driver, started under spark-submit by its setup task), a store written by real Flink. Checks the Delta tables' contents and the tasks' XCom
results, not just task states.

* local: the chain store as Flink wrote it runs through a real scheduler instead, triggered through the
  REST API (test_airflow_local.py), with the same checks (`check_chains_and_validation`);
* S3: the same tasks on a relocated copy of the chain store on the moto S3 server, through an Airflow
  'aws' connection, run on a Spark standalone cluster with the same checks
  (tests/cluster/test_standalone_cluster.py);
* damaged: a copy with one of A's shared SSTs deleted that job C's newest checkpoint uses: the
  run fails at `validate`, on its first try, without a retry, naming the snapshot; `gc` never runs.
"""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from statekeeper.dag_console import console_to_file, run_dag_quietly
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references, relocate_store
from tests.orchestration.support import runs_unrestorable, table_rows

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.flink, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def maintenance_dag(airflow_db):
    """A freshly parsed DAG per test, as a worker would have: dag.test() runs tasks in this process
    and the task runner merges a run's conf into the task objects' params, so a DAG object reused
    across runs would carry one run's form values into the next."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["checkpoint_maintenance"]
    # dag.test() honours retry delays (minutes); a failure here should surface at once.
    for task in dag.tasks:
        task.retries = 0
    return dag


def task_states(run) -> dict[str, tuple[str, int]]:
    return {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}


def xcom_results(run) -> dict[str, dict]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id,
                                                  key="return_value")).all()
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}


def test_dag_fails_without_retry_on_unrestorable_checkpoint(maintenance_dag, flink_store_for_airflow, tmp_path):
    fixture = flink_store_for_airflow.fixture
    version = fixture.version
    truth = oracle_references(version, fixture.metadata_files())
    old = normalize_uri(str(fixture.root))
    copy = relocate_store(fixture.root, str(tmp_path / "damaged"))

    def moved(u: str) -> str:
        return copy + u[len(old):]

    c_newest = normalize_uri(str(Path(fixture.job("C")["retained_checkpoints"][-1]) / "_metadata"))
    a_shared = normalize_uri(fixture.job("A")["job_dir"]) + "/shared/"
    users = lambda f: {m for m, files in truth.items() if f in files}  # noqa: E731
    gone = min((f for f in truth[c_newest] if f.startswith(a_shared)), key=lambda f: (len(users(f)), f))
    Path(moved(gone)[len("file://"):]).unlink()
    broken = {moved(m) for m in users(gone)}

    validate = maintenance_dag.get_task("validate")
    # A retry would show as try 2 after one second; the operator must fail for good on exit 1.
    validate.retries, validate.retry_delay = 1, timedelta(seconds=1)
    warehouse = str(tmp_path / "warehouse")
    # Run as `make demo` runs its DAGs: output into a log file, a line per task on the terminal.
    log, lines = tmp_path / "dag.log", []
    with console_to_file(log):
        outcome = run_dag_quietly(maintenance_dag, {"roots": [f"{copy}/checkpoints"], "warehouse": warehouse}, log,
                                  lines.append)
    run = outcome.run
    states = task_states(run)
    task_lines = [line for line in lines if not line.startswith("  | ") and "---" not in line]
    assert sorted(line.split()[0] for line in task_lines) == sorted(states), lines
    assert {line.split()[0]: line.split()[1] for line in task_lines} == {t: s for t, (s, _) in states.items()}
    assert set(outcome.failed_tails) == {"validate", "run_outcome"}, lines
    # The failed task's own output, cut from the log: its spark-submit's summary naming the damage.
    assert "validation run" in outcome.failed_tails["validate"] and "unrestorable" in outcome.failed_tails["validate"]
    assert f"--- validate failed; the end of its output (all of it: {log}) ---" in "\n".join(lines)
    assert "index run" in log.read_text() and "index run" not in "\n".join(lines)
    # Every step ran in the run's one Spark driver (statekeeper.warm_driver), which the teardown stopped.
    text = log.read_text()
    for entry_point in ("index_checkpoints", "compute_chains", "validate_checkpoints", "build_report"):
        assert f"{entry_point} ran in the DAG run's Spark driver" in text, entry_point
    assert "stopped the run's Spark driver after 4 job(s)" in text
    assert str(run.state) == "failed", states
    assert states["index"][0] == "success" and states["chains"][0] == "success", states
    assert states["validate"] == ("failed", 1), states
    assert states["gc"][0] == "upstream_failed", states     # never collect garbage after a failed validation
    assert states["compact"][0] == "upstream_failed", states
    assert states["maintain_warehouse"][0] == "upstream_failed", states
    # the report is written all the same, and shows C's newest checkpoint as not restorable; the run
    # stays failed through run_outcome
    assert states["report"][0] == "success" and states["run_outcome"][0] == "failed", states
    report = json.loads(Path(warehouse, "_reports", "runs", xcom_results(run)["report"]["run_id"],
                             "report.json").read_text())
    job_c = fixture.job("C")["job_id"]
    assert [h["newest_restorable"] for h in report["health"] if h["job_dir"] == job_c] == [False], report["health"]
    assert report["jobs_unrestorable"] == runs_unrestorable(warehouse, run.run_id) >= 1

    runs = [r for r in table_rows(warehouse, "validation_runs") if r["airflow_run_id"] == run.run_id]
    assert len(runs) == 1 and runs[0]["status"] == "unrestorable", runs
    assert moved(c_newest) in {normalize_uri(u) for u in runs[0]["unrestorable"]}, runs[0]["unrestorable"]
    errors = {normalize_uri(r["snapshot_uri"]) for r in table_rows(warehouse, "validation_results")
              if r["check"] == "file_exists" and r["severity"] == "error"}
    assert errors == broken
