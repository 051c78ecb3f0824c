"""The maintenance DAG end to end with dag.test(): real Airflow (SQLite), real Spark on local[2] (the run's
one shared driver, started under spark-submit by its setup task), a store written by real Flink. Checks the Delta tables' contents and the tasks' XCom
results, not just task states.

* local: the chain store as Flink wrote it runs through a real scheduler instead, triggered through the
  REST API (test_airflow_local.py), with the same checks (`check_chains_and_validation`);
* S3: the same tasks on a relocated copy of the chain store on the session's S3 server, through an Airflow
  'aws' connection, run on a Spark standalone cluster with the same checks
  (tests/cluster/test_standalone_cluster.py);
* damaged: a copy with one of A's shared SSTs deleted that job C's newest checkpoint uses: the
  run fails at `validate`, on its first try, without a retry, naming the snapshot; `gc` never runs.
  The same run, then the DR copy DAG and one DR follow round on it, push their figures to a real Pushgateway
  that a real Prometheus scrapes (tests/plugins/prometheus.py): every metric of docs/metrics.md is there with
  the value the Delta tables give, and of the shipped alerts only the not-restorable one fires.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from statekeeper.dev.dag_console import console_to_file, run_dag_quietly
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references, relocate_store
from tests.orchestration.support import runs_unrestorable, table_rows

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.flink, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def fresh_dag(dag_id: str):
    """A freshly parsed DAG per run, as a worker would have: dag.test() runs tasks in this process
    and the task runner merges a run's conf into the task objects' params, so a DAG object reused
    across runs would carry one run's form values into the next."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags[dag_id]
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


PUSHGATEWAY_CONN = "statekeeper_test_pushgateway"


@dataclass
class DamagedRun:
    """The maintenance DAG's run on the damaged store, and what the tests check it against."""

    fixture: Any
    copy: str                  # the damaged store (file:// URI); its root is <copy>/checkpoints
    warehouse: str
    broken: set[str]           # the snapshots that use the deleted file
    c_newest: str              # job C's newest checkpoint, as the cached fixture names it
    outcome: Any
    lines: list[str]
    log: Path
    work: Path
    figures: dict[tuple, float]   # what the run's last step read from the tables (statekeeper.metrics.gather)

    def moved(self, uri: str) -> str:
        return self.copy + uri[len(normalize_uri(str(self.fixture.root))):]


@pytest.fixture(scope="module")
def metrics_settings(pushgateway):
    """The deployment's metrics settings for this module's runs: the Pushgateway as an Airflow connection
    (environment connections and Variables, which the task runner's secrets chain reads before the database),
    a DR threshold of its own, and a DR allowlist."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(f"AIRFLOW_CONN_{PUSHGATEWAY_CONN.upper()}",
                  json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": pushgateway.port}))
        mp.setenv("AIRFLOW_VAR_STATEKEEPER_ALERT_DR_RPO", "2h")
        yield mp


@pytest.fixture(scope="module")
def damaged(airflow_db, flink_store_for_airflow, metrics_settings, tmp_path_factory) -> DamagedRun:
    """One maintenance run on a copy of the chain store with one of A's shared SSTs deleted that job C's newest
    checkpoint uses; its last step pushes to the Pushgateway named in the form (metrics_conn_id)."""
    tmp_path = tmp_path_factory.mktemp("damaged-run")
    fixture = flink_store_for_airflow.fixture
    truth = oracle_references(fixture.version, fixture.metadata_files())
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

    maintenance_dag = fresh_dag("checkpoint_maintenance")
    validate = maintenance_dag.get_task("validate")
    # A retry would show as try 2 after one second; the operator must fail for good on exit 1.
    validate.retries, validate.retry_delay = 1, timedelta(seconds=1)
    warehouse = str(tmp_path / "warehouse")
    # Run as `make demo` runs its DAGs: output into a log file, a line per task on the terminal.
    log, lines = tmp_path / "dag.log", []
    with console_to_file(log):
        outcome = run_dag_quietly(maintenance_dag, {"roots": [f"{copy}/checkpoints"], "warehouse": warehouse,
                                                    "metrics_conn_id": PUSHGATEWAY_CONN}, log, lines.append)
    return DamagedRun(fixture, copy, warehouse, broken, c_newest, outcome, lines, log, tmp_path,
                      figures(("checkpoint_maintenance", warehouse, "maintenance")))


def figures(*groups: tuple[str, str, str]) -> dict[tuple, float]:
    """The figures of each (DAG, warehouse, scope) group as a push reads them from the tables now (later runs
    change the tables: the DR DAG writes another report run), keyed as _series keys Prometheus's."""
    from statekeeper.metrics.gather import gather
    from statekeeper.metrics.names import Scope
    from statekeeper.metrics.settings import Thresholds
    from statekeeper.tables import Warehouse

    thresholds, problems = Thresholds.parse({"dr_rpo": os.environ.get("AIRFLOW_VAR_STATEKEEPER_ALERT_DR_RPO", "")})
    assert problems == []
    out = {}
    for dag, where, scope in groups:
        for s in gather(Warehouse(where), Scope(scope), thresholds):
            out[(s.name, dag, normalize_uri(where), *sorted(s.labels))] = s.value
    return out


def test_dag_fails_without_retry_on_unrestorable_checkpoint(damaged):
    fixture, warehouse, outcome, lines, log = (damaged.fixture, damaged.warehouse, damaged.outcome, damaged.lines,
                                               damaged.log)
    moved, c_newest, broken = damaged.moved, damaged.c_newest, damaged.broken
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
    # Every step ran in the run's one Spark driver (statekeeper.launch.warm_driver), which the teardown stopped.
    text = log.read_text()
    for entry_point in ("index_checkpoints", "compute_chains", "validate_checkpoints", "build_report"):
        assert f"{entry_point} ran in the DAG run's Spark driver" in text, entry_point
    assert "stopped the run's Spark driver after 4 job(s)" in text
    # its last step pushed the run's figures (test_metrics_reach_prometheus checks what arrived), in one line
    assert len(re.findall(r"metrics: pushed \d+ series to the Pushgateway http://127\.0\.0\.1:\d+ \(job=statekeeper, "
                          r"dag=checkpoint_maintenance, warehouse file://", text)) == 1, text[-3000:]
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


# -- the run's figures in Prometheus -------------------------------------------------------------------------

# job C's figures after the runs below; other job directories are checked against the tables the same way
DR_LEFTOVER = "0" * 31 + "1"        # a job directory at the DR target without any snapshot: ownerless


@dataclass
class DrRuns:
    dr_warehouse: str
    target: str
    copied_job: str           # the one job directory with a restorable checkpoint left
    copy: Any
    follow: Any
    pushed_at: float          # Unix time after the last push
    figures: dict[tuple, float]


@pytest.fixture(scope="module")
def dr_runs(damaged, metrics_settings) -> DrRuns:
    """After the damaged run: the DR copy DAG for the job that still has a restorable checkpoint (its latest
    restorable checkpoint to a DR root, then retention there: the others have none, and a copy run that finds a
    job without one fails before retention) and one DR follow round over all jobs (the newest checkpoints that
    use the deleted file are refused). The DR root already holds an ownerless job directory and an old orphan
    in the copied job's directory, so the DR store's GC has both to report. The copy DAG's form names the
    Pushgateway; the follow round finds it in the Variable."""
    work = damaged.work
    target = normalize_uri(str(work / "dr"))
    dr_warehouse = str(work / "dr-warehouse")
    ten_days_ago = time.time() - 10 * 86400
    [copied_job] = [j["job_dir"] for j in table_rows(damaged.warehouse, "validation_jobs") if j["latest_restorable_uri"]]
    for path, size in ((work / "dr" / "checkpoints" / DR_LEFTOVER / "shared" / "leftover", 1000),
                       (work / "dr" / "checkpoints" / copied_job / "shared" / "stale-orphan", 500)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, (ten_days_ago, ten_days_ago))
    metrics_settings.setenv("AIRFLOW_VAR_STATEKEEPER_DR_ALLOWED_TARGETS", target)
    conf = {"targets": [target], "warehouse": damaged.warehouse}
    lines: list[str] = []
    with console_to_file(work / "dr.log"):
        copied = run_dag_quietly(fresh_dag("checkpoint_dr_copy"), {**conf, "dr_warehouse": dr_warehouse,
                                                                   "job_filter": copied_job,
                                                                   "metrics_conn_id": PUSHGATEWAY_CONN},
                                 work / "dr.log", lines.append)
    pushed = figures(("checkpoint_dr_copy", damaged.warehouse, "dr_copy"), ("checkpoint_dr_copy", dr_warehouse,
                                                                            "maintenance"))
    metrics_settings.setenv("AIRFLOW_VAR_STATEKEEPER_METRICS_CONN_ID", PUSHGATEWAY_CONN)
    with console_to_file(work / "follow.log"):
        followed = run_dag_quietly(fresh_dag("checkpoint_dr_follow"), conf, work / "follow.log", lines.append)
    pushed_at = time.time()
    pushed.update(figures(("checkpoint_dr_follow", damaged.warehouse, "dr_follow")))
    return DrRuns(dr_warehouse, target, copied_job, copied, followed, pushed_at, pushed)


def _series(prometheus, warehouses: set[str]) -> dict[tuple, float]:
    """Every statekeeper_ series Prometheus holds now of `warehouses`: (name, dag, warehouse, (label, value)...) ->
    value. The Pushgateway and Prometheus are the session's: other modules' pushes (tests/metrics) are groups of
    other warehouses."""
    out = {}
    for r in prometheus.query('{__name__=~"statekeeper_.+"}'):
        if r["metric"].get("warehouse") not in warehouses:
            continue
        labels = dict(r["metric"])
        name = labels.pop("__name__")
        assert labels.pop("job") == "statekeeper", r
        labels.pop("instance", None)
        dag, warehouse = labels.pop("dag"), labels.pop("warehouse")
        key = (name, dag, warehouse, *sorted(labels.items()))
        assert key not in out, key
        out[key] = float(r["value"][1])
    return out


def _ts(value) -> float:
    return value.timestamp()


def test_metrics_reach_prometheus_and_only_the_not_restorable_alert_fires(damaged, dr_runs, prometheus):
    from statekeeper.metrics.names import METRICS

    fixture, warehouse, dr_warehouse = damaged.fixture, normalize_uri(damaged.warehouse), dr_runs.dr_warehouse
    states = task_states(dr_runs.copy.run)
    assert str(dr_runs.copy.run.state) == "success", states
    assert task_states(dr_runs.follow.run)["dr_follow"][0] == "failed"   # C refused: the round fails, and pushes
    for outcome in (dr_runs.copy, dr_runs.follow):
        text = outcome.log.read_text()
        assert len(re.findall(r"metrics: pushed \d+ series to the Pushgateway ", text)) == 1, text[-3000:]
    prometheus.scraped_after(dr_runs.pushed_at)
    dr_wh = normalize_uri(dr_warehouse)
    got = _series(prometheus, {warehouse, dr_wh})

    # 1. What Prometheus holds of these warehouses is exactly what each run's last step read from the tables when it
    # pushed: the figures of each (DAG, warehouse) group, nothing more, nothing less.
    assert got == pytest.approx({**damaged.figures, **dr_runs.figures})
    # every documented metric is there
    assert {key[0] for key in got} == {m.name for m in METRICS}

    def value(name: str, dag: str, where: str, **labels: str) -> float:
        return got[(name, dag, where, *sorted(labels.items()))]

    # 2. Checked against the Delta tables directly, per job directory and per run.
    root = normalize_uri(f"{damaged.copy}/checkpoints")
    jobs = {j["job_dir"]: j for j in table_rows(damaged.warehouse, "validation_jobs")}
    mtimes = {r["uri"]: r["metadata_mtime"] for r in table_rows(damaged.warehouse, "snapshots")}
    sizes: dict[str, int] = {}
    for f in table_rows(damaged.warehouse, "files"):
        sizes[f["job_dir"]] = sizes.get(f["job_dir"], 0) + f["size"]
    job_c = fixture.job("C")["job_id"]
    assert jobs[job_c]["newest_restorable"] is False and jobs[job_c]["newest_uri"] == damaged.moved(damaged.c_newest)
    m = "checkpoint_maintenance"
    for job_dir, j in jobs.items():
        labels = {"root": root, "job_dir": job_dir, "kind": j["kind"]}
        assert value("statekeeper_job_newest_restorable", m, warehouse, **labels) == int(j["newest_restorable"])
        assert value("statekeeper_job_newest_checkpoint_id", m, warehouse, **labels) == j["newest_checkpoint_id"]
        assert value("statekeeper_job_newest_checkpoint_timestamp_seconds", m, warehouse, **labels) == \
            pytest.approx(_ts(mtimes[j["newest_uri"]]))
        latest = ("statekeeper_job_latest_restorable_checkpoint_id", m, warehouse, *sorted(labels.items()))
        assert got.get(latest) == j["latest_restorable_checkpoint_id"], latest   # absent when none restores
        assert value("statekeeper_job_stored_bytes", m, warehouse, root=root, job_dir=job_dir) == sizes[job_dir]
    # B and C use A's shared files: A's are pinned
    job_a = fixture.job("A")["job_id"]
    assert value("statekeeper_job_pinned_bytes", m, warehouse, root=root, job_dir=job_a) > 0
    [validation] = table_rows(damaged.warehouse, "validation_runs")
    assert value("statekeeper_run_succeeded", m, warehouse, step="validate", status="unrestorable") == 0
    [index] = table_rows(damaged.warehouse, "index_runs")
    assert value("statekeeper_run_last_success_timestamp_seconds", m, warehouse, step="index") == \
        pytest.approx(_ts(index["finished_at"]))
    # the DR copy: the copied job's latest restorable checkpoint, verified, is its recovery point; the follow
    # round refused every newest checkpoint that uses the deleted file, once
    copies = table_rows(damaged.warehouse, "dr_copies")
    [copy] = [c for c in copies if c["status"] == "verified"]
    assert copy["job_dir"] == dr_runs.copied_job
    for dag in ("checkpoint_dr_copy", "checkpoint_dr_follow"):
        assert value("statekeeper_dr_recovery_point_timestamp_seconds", dag, warehouse, root=root,
                     job_dir=copy["job_dir"]) == pytest.approx(_ts(copy["source_completed_at"]))
        assert value("statekeeper_dr_last_verified_copy_timestamp_seconds", dag, warehouse, root=root,
                     job_dir=copy["job_dir"]) == pytest.approx(_ts(copy["finished_at"]))
    # a refusal is a line of the round's problems, starting with the refused checkpoint's _metadata
    [round_] = [r for r in table_rows(damaged.warehouse, "dr_runs") if r["mode"] == "follow"]
    refused = {j for j in jobs if any(p.startswith(f"{root}/{j}/") for p in round_["problems"])}
    assert job_c in refused and value("statekeeper_dr_run_problems", "checkpoint_dr_follow", warehouse,
                                      step="dr_follow") == len(round_["problems"])
    for job_dir in refused | {copy["job_dir"]}:
        assert value("statekeeper_dr_follow_consecutive_refusals", "checkpoint_dr_follow", warehouse, root=root,
                     job_dir=job_dir) == (1 if job_dir in refused else 0), job_dir
    assert value("statekeeper_threshold_dr_rpo_seconds", "checkpoint_dr_follow", warehouse) == 7200
    # the DR store's own warehouse: its GC planned the old orphan in A's directory and held back the leftover
    gc = sorted(table_rows(dr_warehouse, "gc_runs"), key=lambda r: r["finished_at"])[-1]
    d = "checkpoint_dr_copy"
    target_root = normalize_uri(f"{dr_runs.target}/checkpoints")
    assert gc["status"] == "planned" and gc["planned"] >= 1
    assert value("statekeeper_gc_run_planned_files", d, dr_wh) == gc["planned"]
    assert value("statekeeper_gc_run_failed_files", d, dr_wh) == gc["failed"] == 0
    planned = [a for a in table_rows(dr_warehouse, "gc_actions") if a["outcome"] == "planned"]
    assert any(a["uri"].endswith("/stale-orphan") for a in planned), planned
    assert value("statekeeper_job_reclaimable_bytes", d, dr_wh, root=target_root, job_dir=dr_runs.copied_job) == \
        sum(a["size"] for a in planned if a["job_dir"] == dr_runs.copied_job)
    assert [o["bytes"] for o in gc["ownerless"] if o["job_dir"] == DR_LEFTOVER] == [1000]
    assert value("statekeeper_job_ownerless_bytes", d, dr_wh, root=target_root, job_dir=DR_LEFTOVER) == 1000

    # 3. The shipped rules on these figures: the not-restorable alert fires for the broken jobs, nothing else.
    unrestorable = {j for j, row in jobs.items() if row["kind"] == "job" and row["newest_restorable"] is False}
    alerts = [a for a in prometheus.query("ALERTS") if a["metric"].get("warehouse") in {warehouse, dr_wh}]
    assert {(a["metric"]["alertname"], a["metric"]["alertstate"], a["metric"].get("job_dir")) for a in alerts} == \
        {("StatekeeperNewestCheckpointNotRestorable", "firing", j) for j in unrestorable}
    assert job_c in unrestorable
    rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"] if r["type"] == "alerting"]
    assert len(rules) == 7 and all(r["health"] == "ok" for r in rules), rules
