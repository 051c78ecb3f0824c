"""`statekeeper inspect` as a user runs it: a subprocess, real files, exit codes, stable JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statekeeper.format import to_bytes
from statekeeper.inspect.metadata import JSON_SCHEMA_VERSION
from tests.format.support.samples import sample_model

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'include'}{os.pathsep}{REPO}")
    return subprocess.run(
        [sys.executable, "-m", "statekeeper.cli", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )


@pytest.fixture()
def snapshot(tmp_path: Path) -> Path:
    chk = tmp_path / "job" / "chk-7"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(to_bytes(sample_model(6)))
    return chk


def test_text_report_names_operators_and_sizes(snapshot: Path):
    res = run_cli("inspect", str(snapshot))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"file://{snapshot}/_metadata" in out
    assert "checkpoint" in out and "metadata V6" in out
    assert "Source: numbers uid=src-uid" in out and "0123456789abcdef0123456789abcdef" in out
    assert "s3://bucket/ckpt/ffffffffffffffffffffffffffffffff/shared" in out  # outside references
    assert "inline" in out


def test_json_report_schema(snapshot: Path):
    res = run_cli("inspect", str(snapshot / "_metadata"), "--json", "--top", "2")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["schema_version"] == JSON_SCHEMA_VERSION
    assert set(r) >= {
        "metadata_uri", "snapshot_dir", "metadata_version", "checkpoint_id", "snapshot_type",
        "format", "sharing", "size", "references", "master_states", "operators", "outside_references",
    }
    assert r["metadata_version"] == 6 and r["checkpoint_id"] == 7 and r["snapshot_type"] == "checkpoint"
    size = r["size"]
    assert size["total_bytes"] == (snapshot / "_metadata").stat().st_size
    assert size["inline_bytes"] == size["task_inline_bytes"] + size["coordinator_bytes"] + size["master_bytes"] + size["changelog_inline_bytes"]
    op = r["operators"][0]
    assert op["name"] == "Source: numbers" and len(op["top_inline"]) == 2
    assert op["inline_bytes"] == sum(k["bytes"] for k in op["inline_by_kind"])
    assert sum(o["inline_bytes"] for o in r["operators"]) + size["master_bytes"] == size["inline_bytes"]
    dirs = {g["directory"] for g in r["outside_references"]}
    assert "s3://bucket/ckpt/ffffffffffffffffffffffffffffffff/shared" in dirs


def test_exit_codes(tmp_path: Path, snapshot: Path):
    assert run_cli("inspect", str(tmp_path / "missing")).returncode == 4
    bad = tmp_path / "bad" / "_metadata"
    bad.parent.mkdir()
    bad.write_bytes((snapshot / "_metadata").read_bytes()[:100])
    res = run_cli("inspect", str(bad))
    assert res.returncode == 3
    assert str(bad) in res.stderr and "byte offset" in res.stderr
    unsupported = tmp_path / "v7" / "_metadata"
    unsupported.parent.mkdir()
    unsupported.write_bytes(b"\x49\x60\x67\x2d\x00\x00\x00\x07" + b"\x00" * 32)
    res = run_cli("inspect", str(unsupported))
    assert res.returncode == 3 and "unsupported metadata version 7" in res.stderr
    assert run_cli("inspect").returncode == 2
    assert run_cli("inspect", str(snapshot), "--top", "x").returncode == 2
    assert run_cli("no-such-command").returncode == 2


@pytest.mark.flink
def test_real_chain_checkpoint_shows_other_jobs(flink_harness, flink_fixture):
    version = flink_harness.FLINK_VERSIONS[-1]
    fixture = flink_fixture(version, "chain_claim")
    chk = fixture.retained_checkpoints("C")[-1]
    res = run_cli("inspect", str(chk), "--json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["metadata_version"] == flink_harness.metadata_version_for(version)
    other = [g for g in r["outside_references"] if not g["same_job"]]
    own = [g for g in r["outside_references"] if g["same_job"]]
    c_job = fixture.job("C")["job_id"]
    assert other and all(c_job not in g["directory"] for g in other)
    assert all(g["directory"].endswith(f"{c_job}/shared") for g in own)
    # every file of this incremental checkpoint lives under some shared/, outside chk-N
    assert r["references"]["outside_files"] == r["references"]["files"] > 0
    keyed = [o for o in r["operators"] if o["uid"] == "keyed-invariant"]
    assert keyed and keyed[0]["referenced_files"] > 0
    text = run_cli("inspect", str(chk))
    assert "OTHER" in text.stdout and "keyed-invariant" in text.stdout
