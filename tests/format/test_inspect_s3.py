"""`statekeeper inspect s3://...` through statekeeper.storage against the session's S3 endpoint (SeaweedFS), on a
real Flink checkpoint uploaded from the harness (same answers as inspecting it locally)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.s3 import s3_env

pytestmark = [pytest.mark.s3, pytest.mark.flink]
REPO = Path(__file__).resolve().parents[2]


def run_cli(env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'include'}{os.pathsep}{REPO}", **env_extra)
    return subprocess.run([sys.executable, "-m", "statekeeper.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_inspect_s3_matches_local(flink_harness, flink_fixture, s3_config, s3_bucket, s3_upload_tree):
    version = flink_harness.FLINK_VERSIONS[-1]
    chk = flink_fixture(version, "inline_heavy").retained_checkpoints("A")[-1]
    prefix = f"s3://{s3_bucket}/ckpt/{chk.parent.name}/{chk.name}"
    assert s3_upload_tree(chk, prefix) >= 1
    env = s3_env(s3_config)
    remote = run_cli(env, "inspect", prefix, "--json")
    assert remote.returncode == 0, remote.stderr
    local = run_cli({}, "inspect", str(chk), "--json")
    assert local.returncode == 0, local.stderr
    r, l = json.loads(remote.stdout), json.loads(local.stdout)
    assert r["metadata_uri"] == f"{prefix}/_metadata"
    for key in ("metadata_version", "checkpoint_id", "snapshot_type", "size", "master_states"):
        assert r[key] == l[key], key
    strip = lambda ops: [{k: v for k, v in o.items() if k != "referenced_bytes"} for o in ops]  # noqa: E731
    assert [o["operator_id"] for o in r["operators"]] == [o["operator_id"] for o in l["operators"]]
    assert [o["inline_bytes"] for o in r["operators"]] == [o["inline_bytes"] for o in l["operators"]]
    assert len(strip(r["operators"])) == len(l["operators"])

    # the object itself, a missing prefix (exit 4) and a corrupt object (exit 3)
    assert run_cli(env, "inspect", f"{prefix}/_metadata").returncode == 0
    missing = run_cli(env, "inspect", f"s3://{s3_bucket}/nope/chk-1")
    assert missing.returncode == 4, missing.stderr
    from statekeeper.storage import StorageConfig
    from statekeeper.storage.s3 import make_s3_client

    cfg = StorageConfig.from_env(env)
    data = (chk / "_metadata").read_bytes()
    make_s3_client(cfg).put_object(Bucket=s3_bucket, Key="bad/chk-1/_metadata", Body=data[: len(data) // 2])
    bad = run_cli(env, "inspect", f"s3://{s3_bucket}/bad/chk-1")
    assert bad.returncode == 3 and f"s3://{s3_bucket}/bad/chk-1/_metadata" in bad.stderr, bad.stderr
