"""The maintenance DAG on a real Spark standalone cluster: what reaches executors that are not the driver.

A master and two workers run as separate JVMs on loopback (tests/plugins/spark_cluster.py); each
worker has one core, its own work directory and an environment without the checkout on PYTHONPATH
and without storage variables, and its Python workers cannot import Statekeeper from any directory
(cluster_site/sitecustomize.py drops such sys.path entries). The maintenance DAG's index, chains,
validate and gc tasks (gc in its default plan mode) are rendered for a manual run and executed by
the real operator, through a Spark connection whose host is the master (client deploy mode: the
driver beside the task, the executors on the workers), against a copy of the 2.3.0 chain store
(A -> B -> C, cross-job shared files) on the session's S3 server (SeaweedFS) and an s3:// warehouse. The same tasks
then run by their entry points in the suite's own `local[2]` session into a second warehouse, and the
two warehouses must hold the same rows. This is also the suite's run of the maintenance tasks on an
S3 store through an Airflow 'aws' connection (the index, chains and validation checks that
tests/orchestration/test_dag_e2e.py made with dag.test() on S3 before).

So this proves, beyond the local tests, that
* the code reaches executors as the operator ships it (the --py-files zip): every executor Python
  worker imported `statekeeper` from the zip Spark fetched into its work directory;
* the storage settings and credentials reach tasks on other JVMs (the workers' environment has
  none: they travel with the tasks, never through the environment);
* both workers ran tasks of every job, and the results equal those of a local run.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from statekeeper.jobs import registry
from statekeeper.launch.jvm_startup import C1_ONLY
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.tables.reader import TableReader
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store
from tests.orchestration.support import FakeSupervisor, render_task
from tests.plugins.airflow import IndexedStore
from tests.plugins.s3 import make_bucket
from tests.plugins.spark_cluster import CLUSTER_SITE, EXECUTOR_MEMORY

# The first test's bound covers the module fixture: the cluster (its own start-up bound is 90 s) and
# four spark-submits, 7 minutes on a busy 2-core machine. A submission that hangs (e.g. executors
# never granted) fails here instead of holding the suite for the global 30 minutes; the cluster is
# stopped by the fixture's teardown either way.
pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3, pytest.mark.flink,
              pytest.mark.slow, pytest.mark.timeout(1200)]
ROOT = Path(__file__).resolve().parents[2]
TASKS = ("index", "chains", "validate", "gc")
# The jobs' Spark application names (their sessions name them, over spark-submit's --name).
APPS = tuple(registry.job(t).app_name for t in TASKS)
CLUSTER_CONN = "statekeeper_test_cluster"
STORAGE_CONN = "statekeeper_test_cluster_s3"

# Columns that legitimately differ between two runs of the same jobs on the same store: the run's own
# ids (each Airflow run and each job run gets new ones), when it ran, and where its warehouse is.
RUN_IDS = {"run_id", "index_run_id", "airflow_run_id", "plan_run_id"}
TIMES = {"started_at", "finished_at", "validated_at", "attempted_at", "data_interval_start", "data_interval_end"}
PER_WAREHOUSE = {
    "warehouse",      # the audit rows name their own warehouse
    "report_uri",     # the validation report is published under the warehouse
    "options",        # the options a job recorded: gc's hold --index-not-before, the run's start
}
VARIES = RUN_IDS | TIMES | PER_WAREHOUSE
# Every table the four jobs write: data tables and audit tables.
TABLES = ("files", "snapshots", "references", "inline_state", "index_runs", "dependencies", "pins", "chains_runs",
          "validation_results", "validation_jobs", "validation_runs", "gc_actions", "gc_runs")
# gc plans nothing here: every object was uploaded seconds ago, and the form refuses a grace period
# under an hour. Its table is still compared (empty on both), its audit rows must match.
MAY_BE_EMPTY = {"gc_actions"}


def _parse_dag():
    """A freshly parsed DAG per run, as a worker has (rendering writes into its task objects)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.dags["checkpoint_maintenance"]


def _client_conf(directory: Path) -> Path:
    """$SPARK_CONF_DIR for spark-submit, as a deployment keeps cluster settings in spark-defaults.conf:
    executors sized to the test workers, the driver reachable from them on loopback, and shuffles
    sized to two cores (the jobs size them only on local masters; Spark's default of 200 made every
    join of this small warehouse run hundreds of empty tasks). Both runs use it, so they compare.

    The driver and executor JVMs compile with C1 only (the administrators' `defaultJavaOptions`, which
    the jobs' own extraJavaOptions add to): on this cluster each lives well under a minute, where C2's
    compiling is CPU the test does not use, as for the DAG's local drivers (statekeeper.launch.jvm_startup).
    What the test checks (code, settings and credentials reaching other JVMs) does not depend on it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spark-defaults.conf").write_text(
        f"spark.executor.memory {EXECUTOR_MEMORY}\n"
        f"spark.executor.defaultJavaOptions {C1_ONLY}\n"
        f"spark.driver.defaultJavaOptions {C1_ONLY}\n"
        "spark.sql.shuffle.partitions 4\n"
        "spark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n")
    return directory


def _run_dag_tasks(conf: dict) -> dict[str, dict]:
    """The DAG's index -> chains -> validate -> gc for a manual run with `conf`: each task rendered as
    a worker renders it (the DAG's own templates and form, tests/orchestration/support.render_task),
    then executed by the real operator, which submits its job with spark-submit. Airflow's scheduler
    and database are not involved (tests/orchestration/test_dag_e2e.py runs whole DAG runs); what
    reaches spark-submit is exactly what a worker would submit. Returns each task's result (XCom)."""
    dag = _parse_dag()
    started = datetime.now(timezone.utc)   # the run's start: gc refuses an index run older than it
    results = {}
    for task_id in TASKS:
        rendered = render_task(dag, task_id, "manual", conf, started=started, supervisor=FakeSupervisor())
        task = dag.get_task(task_id)
        for name, value in rendered.items():
            setattr(task, name, value)
        results[task_id] = task.execute({})
    return results


def _run_in_session(conf: dict, storage_env: dict[str, str], out: Path) -> dict[str, dict]:
    """The same tasks' application arguments, rendered the same way, run by their entry points in this
    process (the suite's local[2] SparkSession) with the storage connection's variables set as the
    operator sets them for spark-submit. Returns each entry point's result (its --result-json)."""
    import importlib

    dag = _parse_dag()
    started = datetime.now(timezone.utc)
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in storage_env.items():
            mp.setenv(name, value)
        for task_id in TASKS:
            rendered = render_task(dag, task_id, "manual", conf, started=started, supervisor=FakeSupervisor())
            entry = importlib.import_module(f"spark_jobs.{registry.job(task_id).entry_point}")
            result_json = out / f"{task_id}.json"
            code = entry.main([str(a) for a in rendered["job_args"]] + ["--result-json", str(result_json)])
            results[task_id] = json.loads(result_json.read_text())
            assert code == 0, results[task_id]
    return results


@pytest.fixture(scope="module")
def runs(spark_cluster, spark, flink_store_for_airflow, s3_config, tmp_path_factory):
    fixture = flink_store_for_airflow.fixture
    bucket = make_bucket(s3_config, "cluster")
    # A copy whose _metadata name the S3 paths (the cached store is never written to).
    store = relocate_store(fixture.root, f"s3://{bucket}/flink", RoutingFileIO(s3_config))
    warehouses = {"cluster": f"s3://{bucket}/warehouse-cluster", "local": f"s3://{bucket}/warehouse-local"}
    with pytest.MonkeyPatch.context() as mp:
        # The Spark connection a deployment defines for its cluster: the host is the master URL.
        mp.setenv(f"AIRFLOW_CONN_{CLUSTER_CONN.upper()}", json.dumps({
            "conn_type": "spark", "host": "spark://127.0.0.1", "port": spark_cluster.master_port,
            "extra": {"deploy-mode": "client"},
        }))
        mp.setenv(f"AIRFLOW_CONN_{STORAGE_CONN.upper()}", json.dumps({
            "conn_type": "aws", "login": s3_config.access_key_id, "password": s3_config.secret_access_key,
            "extra": {"endpoint_url": s3_config.endpoint, "region_name": s3_config.region, "addressing_style": "path"},
        }))
        mp.setenv("SPARK_CONF_DIR", str(_client_conf(tmp_path_factory.mktemp("spark-conf"))))
        common = {"roots": [f"{store}/checkpoints"], "storage_conn_id": STORAGE_CONN, "spark_conn_id": CLUSTER_CONN}
        timings = {}
        begin = time.monotonic()
        cluster = _run_dag_tasks({**common, "warehouse": warehouses["cluster"]})
        timings["cluster"] = time.monotonic() - begin
    # The reference: the same tasks' arguments run in this process's local[2] session.
    begin = time.monotonic()
    local = _run_in_session({**common, "warehouse": warehouses["local"]}, _connection_env(STORAGE_CONN, s3_config),
                            tmp_path_factory.mktemp("in-session"))
    timings["local"] = time.monotonic() - begin
    print(f"pipeline wall time: cluster {timings['cluster']:.0f}s, in-session local[2] {timings['local']:.0f}s")
    return {"fixture": fixture, "store": store, "warehouses": warehouses, "cluster": cluster, "local": local,
            "spark_cluster": spark_cluster, "s3_config": s3_config}


def _connection_env(conn_id: str, s3_config) -> dict[str, str]:
    """What the operator exports for the storage connection (its own mapping, tests/orchestration)."""
    from tests.orchestration.support import plugin_module

    return plugin_module("connections").storage_env_from_connection(
        "aws", s3_config.access_key_id, s3_config.secret_access_key,
        {"endpoint_url": s3_config.endpoint, "region_name": s3_config.region, "addressing_style": "path"})


def _rows(warehouse: str, name: str, s3_config) -> list[dict]:
    return TableReader(Warehouse(warehouse, s3_config)).read(name).to_pylist()


def _comparable(rows: list[dict]) -> list[str]:
    """The rows without the columns that vary per run, as canonical JSON, sorted (a multiset)."""
    return sorted(json.dumps({k: v for k, v in r.items() if k not in VARIES}, sort_keys=True, default=str)
                  for r in rows)


def test_the_dag_succeeds_on_the_cluster(runs):
    results = runs["cluster"]
    assert results["index"]["status"] == "succeeded", results["index"]
    assert results["chains"]["status"] == "succeeded", results["chains"]
    assert results["validate"]["status"] == "ok", results["validate"]
    assert results["gc"]["status"] == "planned" and results["gc"]["mode"] == "plan", results["gc"]
    # Cross-job chains were found through the cluster: B and C use files of job A.
    fixture = runs["fixture"]
    job_a = fixture.job("A")["job_id"]
    deps = _rows(runs["warehouses"]["cluster"], "dependencies", runs["s3_config"])
    on_a = {d["snapshot_job_id"] for d in deps if d["target_job_id"] == job_a and d["snapshot_job_id"] != job_a}
    assert on_a >= {fixture.job(n)["job_id"] for n in ("B", "C")}, on_a
    # What the maintenance DAG's S3 run used to check through dag.test(): the index run names the
    # form's roots, every _metadata of the store is indexed and ok with its directory's id, and the
    # cross-job references were resolved (they name A's files by the paths Flink wrote).
    local_root = normalize_uri(str(fixture.root))
    store = IndexedStore(fixture, [f"{runs['store']}/checkpoints"],
                         uri_map=lambda p: runs["store"] + normalize_uri(str(p))[len(local_root):])
    index_runs = _rows(runs["warehouses"]["cluster"], "index_runs", runs["s3_config"])
    assert len(index_runs) == 1, index_runs
    store.check_index_run(runs["warehouses"]["cluster"], index_runs[0]["airflow_run_id"],
                          storage_options=runs["s3_config"].deltalake_storage_options())
    validation = _rows(runs["warehouses"]["cluster"], "validation_jobs", runs["s3_config"])
    newest = {normalize_uri(store.uri_of(Path(fixture.job(n)["retained_checkpoints"][-1]) / "_metadata"))
              for n in ("A", "B", "C")}
    restorable = {normalize_uri(j["newest_uri"]) for j in validation if j["kind"] == "job" and j["newest_restorable"]}
    assert newest <= restorable, (newest, validation)


@pytest.mark.parametrize("table", TABLES)
def test_tables_equal_those_of_a_local_run(runs, table):
    cluster = _rows(runs["warehouses"]["cluster"], table, runs["s3_config"])
    local = _rows(runs["warehouses"]["local"], table, runs["s3_config"])
    assert cluster or table in MAY_BE_EMPTY, f"{table} is empty after the cluster run"
    assert len(cluster) == len(local)
    assert _comparable(cluster) == _comparable(local)


def _executor_imports(cluster) -> list[tuple[str, str]]:
    """(worker name, application id) of every `import statekeeper` in an executor's Python worker,
    from the records cluster_site/sitecustomize.py wrote; fails on an import from anywhere but the
    zip Spark fetched into an executor directory (<work-dir>/<app id>/<executor id>/statekeeper.zip)."""
    out = []
    for f in sorted(cluster.import_log_dir.glob("*.jsonl")):
        for record in map(json.loads, f.read_text().splitlines()):
            if record["event"] != "import":
                continue
            origin = Path(record["origin"] or "")
            worker = next((w for w in cluster.workers if origin.is_relative_to(w.work_dir)), None)
            parts = origin.relative_to(worker.work_dir).parts if worker else ()
            assert worker and parts[2:4] == ("statekeeper.zip", "statekeeper"), record
            out.append((worker.name, parts[0]))
    return out


def test_every_job_ran_on_the_cluster(runs):
    cluster = runs["spark_cluster"]
    completed = [a for a in cluster.state()["completedapps"] if a["name"] in APPS]
    assert sorted(a["name"] for a in completed) == sorted(APPS), cluster.state()["completedapps"]
    assert all(a["state"] == "FINISHED" for a in completed), completed
    app_ids = {a["id"] for a in completed}
    for worker in cluster.workers:
        # Each application had an executor on each worker: <work-dir>/<app id>/<executor id>/ holds
        # its logs and the files it fetched from the driver, the shipped library among them. An executor
        # fetches them with its first task, so one the master launched as the application stopped (its
        # executors exited a moment before it unregistered, and the master replaced them) holds only
        # its logs: each application needs one executor per worker with the library, not every one.
        executor_dirs = [d for d in worker.work_dir.glob("app-*/*") if d.parent.name in app_ids]
        assert {d.parent.name for d in executor_dirs} == app_ids, (worker.name, executor_dirs)
        shipped = {d.parent.name for d in executor_dirs if (d / "statekeeper.zip").is_file()}
        assert shipped == app_ids, (worker.name, {str(d): sorted(os.listdir(d)) for d in executor_dirs})
    imports = _executor_imports(cluster)
    # Statekeeper code ran in executors on both workers, for every job.
    assert {w for w, _ in imports} == {w.name for w in cluster.workers}, imports
    assert {app for _, app in imports} == app_ids, imports


def test_executors_got_the_code_only_from_the_shipped_zip(runs):
    cluster = runs["spark_cluster"]
    starts = [json.loads(line) for f in sorted(cluster.import_log_dir.glob("*.jsonl"))
              for line in f.read_text().splitlines() if json.loads(line)["event"] == "start"]
    assert starts, f"no executor Python worker recorded its start in {cluster.import_log_dir}"
    for record in starts:
        # The driver must not push its checkout to the executors (spark.executorEnv.PYTHONPATH would
        # also replace the PYTHONPATH the cluster gives them): the guard is all they inherit.
        assert record["pythonpath"].split(os.pathsep)[-1] == str(CLUSTER_SITE), record
        assert str(ROOT / "include") not in record["pythonpath"], record
    # _executor_imports fails on any import from elsewhere.
    assert _executor_imports(cluster)
