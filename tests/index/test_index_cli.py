"""The thin entry point `spark_jobs/index_checkpoints.py`: help, in-process runs, spark-submit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.launch.jvm_startup import C1_ONLY, mapped_archive_option
from statekeeper.tables import Warehouse
from tests.index.support import table_rows

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "spark_jobs" / "index_checkpoints.py"
VERSION = harness.FLINK_VERSIONS[0]


def test_help_describes_the_job():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for option in ("--roots", "--warehouse", "--engine", "--job-filter", "--run-id", "--data-interval-start"):
        assert option in out.stdout
    assert "STATEKEEPER_S3_ENDPOINT" in out.stdout


def test_missing_roots_is_a_usage_error(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--warehouse", str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "at least one root" in out.stderr


@pytest.mark.flink
@pytest.mark.spark
def test_main_in_process_records_the_airflow_run(spark, flink_fixture, tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import index_checkpoints
    finally:
        sys.path.remove(str(SCRIPT.parent))
    fixture = flink_fixture(VERSION, "incremental")
    result_file = tmp_path / "result.json"
    code = index_checkpoints.main([
        "--roots", f"{fixture.root / 'checkpoints'},{fixture.root / 'savepoints'}",
        "--warehouse", str(tmp_path / "wh"), "--run-id", "scheduled__2026-01-02T02:00:00+00:00",
        "--data-interval-start", "2026-01-01T02:00:00+00:00", "--data-interval-end", "2026-01-02T02:00:00+00:00",
        "--result-json", str(result_file), "--progress-interval", "0",
    ])
    assert code == 0
    result = json.loads(result_file.read_text())
    assert result["status"] == "succeeded" and result["metadata_found"] == len(fixture.metadata_files())
    (run,) = table_rows(Warehouse(str(tmp_path / "wh")), "index_runs")
    assert run["airflow_run_id"] == "scheduled__2026-01-02T02:00:00+00:00"
    assert run["data_interval_start"].isoformat() == "2026-01-01T02:00:00+00:00"
    assert run["run_id"] == result["run_id"] and run["metadata_parsed"] == result["metadata_parsed"]


@pytest.mark.flink
@pytest.mark.slow
def test_spark_submit_without_pythonpath(flink_fixture, tmp_path):
    """Under spark-submit the workers (data-source planning, tasks, commit) must import this
    checkout's statekeeper without the caller setting PYTHONPATH."""
    fixture = flink_fixture(VERSION, "incremental")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = sys.executable
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text("rootLogger.level = error\nrootLogger.appenderRef.c.ref = c\nappender.c.type = Console\n"
                     "appender.c.name = c\nappender.c.layout.type = PatternLayout\n"
                     "appender.c.layout.pattern = %p %c: %m%n\n")
    result_file = tmp_path / "result.json"
    # The driver starts as the DAG's local drivers do (C1 only, the class archive if one was written): what
    # this proves is the Python import path, which the JVM's compilers do not change.
    java = " ".join(filter(None, [f"-Dlog4j2.configurationFile=file:{log4j}", C1_ONLY, mapped_archive_option({}, env)]))
    # Delta's jars and settings, as a user running spark-submit by hand gets them
    delta = subprocess.run([sys.executable, "-m", "statekeeper.launch.jars", "--submit-args"], capture_output=True,
                           text=True, env=env, check=True).stdout.splitlines()
    assert delta[0] == "--conf" and len(delta) % 2 == 0, delta
    cmd = [str(Path(sys.executable).with_name("spark-submit")), "--master", "local[2]", *delta,
           "--conf", "spark.ui.enabled=false", "--driver-memory", "1g",
           "--conf", f"spark.driver.extraJavaOptions={java}",
           str(SCRIPT), "--roots", str(fixture.root / "checkpoints"), "--warehouse", str(tmp_path / "wh"),
           "--result-json", str(result_file)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "succeeded" in out.stdout
    result = json.loads(result_file.read_text())
    assert result["metadata_parsed"] == len(list((fixture.root / "checkpoints").rglob("_metadata")))
