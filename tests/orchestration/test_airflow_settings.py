"""The Astro-format settings loader: conversion rules, fail-closed parsing, and a real import."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from statekeeper.dev.airflow_settings import SettingsError, expand, load_settings, parse_settings, write_import_files

ROOT = Path(__file__).resolve().parents[2]


def test_expand_nested_defaults_and_errors():
    env = {"HOME_DIR": "/h", "EMPTY": ""}
    assert expand("${A:-file://${HOME_DIR}/x}", env) == "file:///h/x"
    assert expand("${HOME_DIR}/y", env) == "/h/y"
    assert expand("${EMPTY:-d}", env) == "d"  # empty counts as unset, as in the shell's :-
    with pytest.raises(SettingsError, match="NOPE is not set"):
        expand("${NOPE}", env)
    with pytest.raises(SettingsError, match="unterminated"):
        expand("${A:-x", env)


def test_project_settings_convert_to_airflow_formats(tmp_path):
    settings = load_settings(ROOT / "airflow_settings.yaml", {"STATEKEEPER_HOME": "/proj"})
    spark = settings.connections["spark_local"]
    assert spark["conn_type"] == "spark" and spark["host"] == "local[2]"
    assert json.loads(spark["extra"]) == {"deploy-mode": "client"}
    s3 = settings.connections["statekeeper_s3_local"]
    assert s3["conn_type"] == "aws" and s3["login"] == "testing"
    assert json.loads(s3["extra"])["endpoint_url"] == "http://127.0.0.1:5000"
    assert settings.variables["statekeeper_warehouse"] == "file:///proj/.statekeeper/warehouse"
    # scheduled gc runs only plan until a deployment sets statekeeper_gc_mode to delete
    assert settings.variables["statekeeper_gc_mode"] == "plan"
    assert settings.variables["statekeeper_gc_older_than"] == "3d"
    # the DR copy DAG: targets mirrored below one base, the allowlist that base, its own warehouse beside it
    assert settings.variables["statekeeper_dr_targets"] == "file:///proj/.statekeeper/dr-store"
    assert settings.variables["statekeeper_dr_allowed_targets"] == "file:///proj/.statekeeper/dr-store"
    assert settings.variables["statekeeper_dr_warehouse"] == "file:///proj/.statekeeper/dr-warehouse"
    assert (settings.variables["statekeeper_dr_keep"], settings.variables["statekeeper_dr_gc_mode"],
            settings.variables["statekeeper_dr_gc_older_than"]) == ("3", "plan", "3d")
    assert settings.variables["statekeeper_dr_storage_conn_id"] == ""
    assert settings.variables["statekeeper_storage_conn_id"] == ""   # the report page: API server's environment
    assert settings.pools == {"statekeeper_spark": {"slots": 1, "description": "Concurrent Statekeeper spark-submit jobs", "include_deferred": False}}
    files = write_import_files(settings, tmp_path)
    assert json.loads(files["connections"].read_text())["spark_local"]["host"] == "local[2]"
    assert files["connections"].stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("text, message", [
    ("airflow: {connections: [{conn_type: spark}]}", "needs conn_id and conn_type"),
    ("airflow: {connections: [{conn_id: a, conn_type: b, host: x}]}", "unknown keys"),
    ("airflow: {pools: [{pool_name: p, pool_slot: 0}]}", "pool_slot must be >= 1"),
    ("airflow: {dags: []}", "unknown keys under 'airflow'"),
    ("airflow: {connections: [{conn_id: a, conn_type: b}, {conn_id: a, conn_type: b}]}", "duplicate conn_id"),
    ("- 1", "top-level 'airflow'"),
])
def test_malformed_settings_fail_closed(text, message):
    with pytest.raises(SettingsError, match=message):
        parse_settings(text, {})


@pytest.mark.airflow
def test_import_into_real_airflow(airflow_db):
    """What `airflow ... import` stored, read back from the metadata DB by Airflow's own models in this
    process (this plugin points AIRFLOW_HOME at the migrated home before Airflow is imported), not by one
    `airflow ... get` process per object (~6 s each)."""
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session

    with create_session() as session:
        spark = session.query(Connection).filter(Connection.conn_id == "spark_local").one()
        pool = session.query(Pool).filter(Pool.pool == "statekeeper_spark").one()
        stored = {v.key: v.val for v in session.query(Variable).filter(
            Variable.key.in_(["statekeeper_warehouse", "statekeeper_dr_storage_conn_id"]))}
    assert spark.conn_type == "spark" and spark.host == "local[2]"
    assert pool.slots == 1
    var = stored["statekeeper_warehouse"]
    assert var.endswith("/.statekeeper/warehouse") and var.startswith("file://")
    assert stored["statekeeper_dr_storage_conn_id"] == ""  # empty, but set
