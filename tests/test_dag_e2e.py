"""The maintenance DAG end to end with dag.test(): real Airflow (SQLite), real spark-submit on
local[2], a store written by real Flink, on local storage and on the moto S3 endpoint. Checks the
Delta tables' contents, not just task states."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.plugins.airflow import IndexedStore

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.flink, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def maintenance_dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["checkpoint_maintenance"]
    # dag.test() honours retry delays (minutes); a failure here should surface at once.
    for task in dag.tasks:
        task.retries = 0
    return dag


def test_dag_indexes_local_store(maintenance_dag, flink_store_for_airflow, tmp_path):
    warehouse = tmp_path / "warehouse"
    run = maintenance_dag.test(run_conf={"roots": flink_store_for_airflow.roots, "warehouse": str(warehouse)})
    assert str(run.state) == "success"
    flink_store_for_airflow.check_index_run(warehouse, run.run_id)


@pytest.mark.s3
def test_dag_indexes_s3_store(maintenance_dag, flink_store_for_airflow, s3_config, s3_bucket, s3_upload_tree,
                              monkeypatch):
    fixture = flink_store_for_airflow.fixture
    prefix = f"s3://{s3_bucket}/flink"
    s3_upload_tree(fixture.root / "checkpoints", f"{prefix}/checkpoints")
    # The storage connection the DAG resolves at run time, defined the way a deployment would.
    monkeypatch.setenv("AIRFLOW_CONN_STATEKEEPER_S3_TEST", json.dumps({
        "conn_type": "aws", "login": s3_config.access_key_id, "password": s3_config.secret_access_key,
        "extra": {"endpoint_url": s3_config.endpoint, "region_name": s3_config.region, "addressing_style": "path"},
    }))
    local_root = fixture.root / "checkpoints"
    store = IndexedStore(fixture, [f"{prefix}/checkpoints"],
                         uri_map=lambda p: f"{prefix}/checkpoints/{Path(p).relative_to(local_root).as_posix()}")
    warehouse = f"s3://{s3_bucket}/warehouse"
    run = maintenance_dag.test(run_conf={"roots": store.roots, "warehouse": warehouse,
                                         "storage_conn_id": "statekeeper_s3_test"})
    assert str(run.state) == "success"
    store.check_index_run(warehouse, run.run_id, storage_options=s3_config.deltalake_storage_options())
