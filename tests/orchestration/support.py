"""Shared by the orchestration tests: the Airflow plugin imported the way Airflow imports it."""
from __future__ import annotations

import copy
import importlib
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def plugin_module(name: str) -> ModuleType:
    """`statekeeper_airflow.<name>`, with plugins/ on sys.path as Airflow puts it (a top-level package)."""
    plugins = str(REPO / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    return importlib.import_module(f"statekeeper_airflow.{name}")


class FakeSupervisor:
    """What a task's supervisor answers a task runner, for rendering templates outside a worker: the
    given XComs (by task id, this run's return values), and "not found" for every Variable the
    environment (AIRFLOW_VAR_*, checked first by the worker's secrets chain) does not hold."""

    def __init__(self, xcoms: dict[str, object] | None = None) -> None:
        self.xcoms = dict(xcoms or {})
        self.xcom_requests: list[str] = []

    def send(self, msg):
        from airflow.sdk.bases.xcom import BaseXCom
        from airflow.sdk.exceptions import ErrorType
        from airflow.sdk.execution_time.comms import (ErrorResponse, GetVariable, GetXComSequenceSlice,
                                                      XComSequenceSliceResult)

        if isinstance(msg, GetXComSequenceSlice):
            self.xcom_requests.append(msg.task_id)
            found = msg.task_id in self.xcoms and msg.key == BaseXCom.XCOM_RETURN_KEY
            return XComSequenceSliceResult(root=[BaseXCom.serialize_value(self.xcoms[msg.task_id])] if found else [])
        if isinstance(msg, GetVariable):
            return ErrorResponse(error=ErrorType.VARIABLE_NOT_FOUND, detail={"message": f"Variable {msg.key} not found"})
        raise AssertionError(f"unexpected request while rendering: {msg!r}")


def render_task(dag, task_id: str, run_type: str, conf: dict | None = None, *, started,
                supervisor: FakeSupervisor | None = None):
    """Render `task_id` of the parsed `dag` as a worker does for a run of `run_type` with `conf`:
    the Task SDK's own RuntimeTaskInstance (as a worker builds it from the API server's
    TIRunContext), the real param validation (the conf merged into the form's defaults), the real
    `dag_run` model, Variables through the real accessor and the DAG's Jinja environment. Returns
    {template field: rendered value}. With `supervisor`, requests a worker sends its supervisor
    (XComs, Variables not in the environment) go to it.

    Manual and asset-triggered runs have no logical date nor data interval; the others cover the day
    before `started`'s 02:00."""
    import airflow.sdk.execution_time.task_runner as task_runner
    from airflow.sdk.api.datamodels._generated import DagRun, DagRunState, DagRunType, TIRunContext
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    task = dag.get_task(task_id)
    run_type = DagRunType(run_type)
    dateless = run_type in (DagRunType.MANUAL, DagRunType.ASSET_TRIGGERED)
    after = started.replace(hour=2, minute=0, second=0, microsecond=0)
    run = DagRun(
        dag_id=dag.dag_id, run_id=f"{run_type.value}__{after.isoformat()}", run_type=run_type,
        logical_date=None if dateless else after - timedelta(days=1),
        data_interval_start=None if dateless else after - timedelta(days=1),
        data_interval_end=None if dateless else after,
        run_after=after, start_date=started, end_date=None,
        state=DagRunState.RUNNING, conf=conf, consumed_asset_events=[], partition_key=None,
    )
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(), task_id=task.task_id, dag_id=dag.dag_id, run_id=run.run_id, try_number=1,
        dag_version_id=uuid.uuid4(), map_index=-1, task=task, start_date=started, max_tries=task.retries,
    )
    ti._ti_context_from_server = TIRunContext(dag_run=run, max_tries=task.retries)
    # A worker renders its own freshly parsed DAG once: rendering writes the values into the task and
    # merging the run's conf sets the values of the DAG's Param objects. Put both back for the next run.
    templates = {name: copy.copy(getattr(task, name)) for name in task.template_fields}
    dag_params, task_params = copy.deepcopy(dag.params), copy.deepcopy(task.params)
    had_comms = hasattr(task_runner, "SUPERVISOR_COMMS")
    saved_comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if supervisor is not None:
        task_runner.SUPERVISOR_COMMS = supervisor
    try:
        ti.render_templates()
        return {name: copy.copy(getattr(ti.task, name)) for name in task.template_fields}
    finally:
        if supervisor is not None:
            if had_comms:
                task_runner.SUPERVISOR_COMMS = saved_comms
            else:
                del task_runner.SUPERVISOR_COMMS
        for name, value in templates.items():
            setattr(task, name, value)
        dag.params, task.params = dag_params, task_params


# -- what a healthy maintenance run on the chain store shows (dag.test() and the REST-triggered run) --

TASKS = ("index", "chains", "validate", "gc", "report")


def table_rows(warehouse: str, name: str, storage_options=None) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(f"{warehouse.rstrip('/')}/{name}", storage_options=storage_options).to_pyarrow_table().to_pylist()


def runs_unrestorable(warehouse: str, airflow_run_id: str) -> int:
    runs = [r for r in table_rows(warehouse, "validation_runs") if r["airflow_run_id"] == airflow_run_id]
    assert len(runs) == 1, runs
    return runs[0]["jobs_unrestorable"]


def check_chains_and_validation(store: Any, warehouse: str, airflow_run_id: str, results: dict,
                                storage_options=None) -> dict:
    """What every healthy run must show beyond the index, from its tasks' XCom results and the tables:
    B and C depend on A, all restorable."""
    from statekeeper.uri import normalize_uri

    fixture = store.fixture
    assert set(results) == set(TASKS), results.keys()
    assert results["index"]["status"] == "succeeded"
    assert results["chains"]["status"] == "succeeded"
    assert results["validate"]["status"] == "ok", results["validate"]
    # GC plans by default (a dry run) and reads this run's index: planned, not blocked
    assert results["gc"]["status"] == "planned" and results["gc"]["mode"] == "plan", results["gc"]

    job_a = fixture.job("A")["job_id"]
    deps = table_rows(warehouse, "dependencies", storage_options)
    on_a = {d["snapshot_job_id"] for d in deps if d["target_job_id"] == job_a and d["snapshot_job_id"] != job_a}
    assert on_a >= {fixture.job(n)["job_id"] for n in ("B", "C")}, on_a

    runs = [r for r in table_rows(warehouse, "validation_runs", storage_options) if r["airflow_run_id"] == airflow_run_id]
    assert len(runs) == 1 and runs[0]["status"] == "ok" and runs[0]["jobs_unrestorable"] == 0, runs
    jobs = table_rows(warehouse, "validation_jobs", storage_options)
    newest = {normalize_uri(store.uri_of(Path(fixture.job(n)["retained_checkpoints"][-1]) / "_metadata"))
              for n in ("A", "B", "C")}
    restorable = {normalize_uri(j["newest_uri"]) for j in jobs if j["kind"] == "job" and j["newest_restorable"]}
    assert newest <= restorable, (newest, jobs)
    return results
