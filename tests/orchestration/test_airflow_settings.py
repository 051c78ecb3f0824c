"""The Astro-format settings loader: conversion rules, fail-closed parsing, and a real import."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from statekeeper.airflow_settings import SettingsError, expand, load_settings, parse_settings, write_import_files

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
    from tests.plugins.airflow import AIRFLOW_BIN

    out = subprocess.run([AIRFLOW_BIN, "connections", "get", "spark_local", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)[0]["host"] == "local[2]"
    pools = subprocess.run([AIRFLOW_BIN, "pools", "get", "statekeeper_spark", "-o", "json"],
                           capture_output=True, text=True, check=True).stdout
    assert json.loads(pools)[0]["slots"] in (1, "1")
    var = subprocess.run([AIRFLOW_BIN, "variables", "get", "statekeeper_warehouse"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert var.endswith("/.statekeeper/warehouse") and var.startswith("file://")
    dr_conn = subprocess.run([AIRFLOW_BIN, "variables", "get", "statekeeper_dr_storage_conn_id"],
                             capture_output=True, text=True)
    assert dr_conn.returncode == 0 and dr_conn.stdout.strip() == "", dr_conn.stderr  # empty, but set
