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

from statekeeper.dev.airflow_local import local_airflow_env

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
    proc = subprocess.run([sys.executable, "-m", "statekeeper.dev.airflow_settings", "airflow_settings.yaml"],
                          env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return airflow_home


class IndexedStore:
    """A harness store to run the DAG on, and the checks its index tables must pass."""

    def __init__(self, fixture, roots: list[str], uri_map=None) -> None:
        self.fixture = fixture
        self.roots = roots
        # Maps a local fixture path to the URI the store has where the DAG reads it (S3 uploads).
        self._uri_map = uri_map or (lambda p: Path(p).as_uri())

    def uri_of(self, path) -> str:
        """Where a fixture file is as the DAG sees it."""
        return self._uri_map(path)

    def check_index_run(self, warehouse: str | Path, airflow_run_id: str, storage_options=None) -> None:
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        from statekeeper.uri import normalize_uri

        base = str(warehouse).rstrip("/")

        def table(name):
            return DeltaTable(f"{base}/{name}", storage_options=storage_options).to_pyarrow_table()

        runs = table("index_runs").filter(pc.equal(pc.field("airflow_run_id"), airflow_run_id))
        assert runs.num_rows == 1, f"no index_runs row for Airflow run {airflow_run_id}"
        run = runs.to_pylist()[0]
        assert run["status"] == "succeeded", run
        assert sorted(normalize_uri(r) for r in run["roots"]) == sorted(normalize_uri(r) for r in self.roots)

        snapshots = table("snapshots")
        expected = {normalize_uri(self._uri_map(p)) for p in self.fixture.metadata_files()}
        assert {normalize_uri(u) for u in snapshots["uri"].to_pylist()} == expected
        assert set(snapshots["status"].to_pylist()) == {"ok"}
        for row in snapshots.to_pylist():
            if row["layout_kind"] == "checkpoint_metadata" or row["dir_checkpoint_id"] is not None:
                assert row["checkpoint_id"] == row["dir_checkpoint_id"], row

        # Job B/C checkpoints of the chain scenario use files in job A's shared/ directory. An S3
        # copy of the store still names them by their original file:// paths (absolute paths are
        # not rewritten by an upload), so match the original location too.
        refs = table("references").to_pylist()
        job_a = self.fixture.job("A")
        a_dir = normalize_uri(Path(job_a["job_dir"]).as_uri()) + "/"
        cross = [r for r in refs if r["snapshot_job_id"] != job_a["job_id"]
                 and (r["file_job_id"] == job_a["job_id"] or normalize_uri(r["file_uri"]).startswith(a_dir))]
        assert cross, "expected references from B/C into A's shared/"
        assert {r["snapshot_job_id"] for r in cross} >= {self.fixture.job(n)["job_id"] for n in ("B", "C")}
        listed = table("files")
        assert listed.num_rows >= len(expected)


@pytest.fixture(scope="session")
def flink_store_for_airflow() -> IndexedStore:
    from tests.harness import get_fixture

    fixture = get_fixture("2.3.0", "chain_claim")
    return IndexedStore(fixture, [(fixture.root / "checkpoints").as_uri()])
