"""The DR follow DAG: its schedule and shape, and what its one task passes `copy_to_dr --mode follow`
(rendered as a worker renders it, then parsed by the entry point's own parser, as in test_dag_dr_copy.py).
What follow mode does is tested on a real Flink store in tests/replicate/test_dr_follow.py."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.orchestration.test_dag_dr_copy import copy_options, dagbag, render, variables  # noqa: F401 - fixtures

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "checkpoint_dr_follow"


@pytest.fixture(scope="module")
def dag(dagbag):  # noqa: F811 - the imported fixture
    return dagbag.dags[DAG_ID]


def test_every_five_minutes_one_run_at_a_time_paused_when_created_and_not_retried(dag):
    from statekeeper.jobs import registry

    from airflow.serialization.serialized_objects import DagSerialization

    # what the scheduler reads back from the DAG processor: a run every five minutes
    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    assert timetable.serialize()["delta"] == timedelta(minutes=5).total_seconds(), timetable.serialize()
    assert dag.max_active_runs == 1 and dag.catchup is False and dag.is_paused_upon_creation is True
    task, = dag.tasks
    assert task.task_id == "dr_follow" and Path(task.application) == ROOT / "spark_jobs" / "copy_to_dr.py"
    assert task.spec == registry.DR and task.final_exit_codes == registry.DR.final_exit_codes
    assert task.retries == 0 and task.pool == "statekeeper_spark"
    for phrase in ("statekeeper_dr_allowed_targets", "completed", "does not parse", "subsumed"):
        assert phrase in dag.doc_md, phrase
    assert not any("allow" in key for key in dag.params)   # the allowlist is the Variable only


def test_a_scheduled_round_follows_the_dr_copy_dags_variables(dag, variables):  # noqa: F811
    fields = render(dag, "dr_follow", "scheduled")
    args = fields["job_args"]
    assert args[0:2] == ["--warehouse", "file:///var/warehouse"]
    options = copy_options(args)
    assert options.mode.value == "follow" and options.snapshots == () and options.include_external is False
    assert options.targets.base == "file:///dr/store"
    assert options.allowed_targets == ("file:///dr/store", "s3://dr-bucket/flink")
    assert (fields["storage_conn_id"], fields["target_storage_conn_id"]) == ("", "")
    variables(statekeeper_dr_storage_conn_id="dr_s3")
    assert render(dag, "dr_follow", "scheduled")["target_storage_conn_id"] == "dr_s3"
    # a run's conf cannot widen the allowlist
    args = render(dag, "dr_follow", "manual", {"targets": ["s3://elsewhere/flink"]})["job_args"]
    from statekeeper.replicate.options import DrOptionsError

    with pytest.raises(DrOptionsError, match="not below any allowed target prefix"):
        copy_options(args)
