"""Airflow for the tests: a private AIRFLOW_HOME with a SQLite DB, this project's DAGs and plugins.

Airflow reads its configuration when first imported, so the environment is set when this plugin
loads, before any test module imports airflow.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from statekeeper.airflow_local import local_airflow_env

_HOME = Path(tempfile.mkdtemp(prefix="statekeeper-airflow-"))
os.environ.update(local_airflow_env(_HOME))
AIRFLOW_BIN = str(Path(sys.executable).with_name("airflow"))


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    return _HOME


@pytest.fixture(scope="session")
def airflow_db(airflow_home: Path) -> Path:
    """A migrated metadata DB with airflow_settings.yaml imported."""
    env = dict(os.environ)
    proc = subprocess.run([AIRFLOW_BIN, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-m", "statekeeper.airflow_settings", "airflow_settings.yaml"],
                          env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return airflow_home
