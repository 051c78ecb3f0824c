"""Files outside every indexed root: job B of a CLAIM chain, indexed as the only root, names files in A's shared/.
The DR copy refuses B's checkpoints for them (nothing written) unless --include-external; with it, A's files go
below the target's _external/, the rewritten `_metadata` names only target objects, and the copy restores in real
Flink with the source store moved away."""
from __future__ import annotations

from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.format import extract_references, open_metadata
from tests.replicate.support import QUIET, copies, dr_pipeline, local, relocated, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def test_files_outside_every_root_are_refused_unless_included_and_then_restore(spark, flink_fixture, tmp_path):
    fx = flink_fixture(VERSION, "chain_claim")
    src = relocated(fx, tmp_path / "src")
    job_dir = lambda name: src + uri(fx.job(name)["job_dir"])[len(uri(fx.root)):]  # noqa: E731
    p = dr_pipeline(spark, tmp_path, [job_dir("B")])
    p.refresh()
    # validation may stat A's files (its --roots names A's directory too), so B's checkpoints are restorable
    from spark_jobs.validate_checkpoints import main as validate
    assert validate(["--warehouse", p.warehouse.uri, "--roots", f"{job_dir('B')},{job_dir('A')}",
                     "--no-quality-suite", *QUIET]) == 0
    target = uri(tmp_path / "dr")
    args = ["--target", target, "--allowed-targets", target]

    code, result = p.dr(*args)
    refused = copies(p.warehouse, result["run_id"])
    assert code == 1 and result["verified"] == 0 and refused, result
    for row in refused:
        assert row["status"] == "failed" and row["target_metadata_uri"] is None, row
        assert "outside every indexed root" in row["problem"] and job_dir("A") in row["problem"], row
    assert [f for f in local(target).rglob("*") if f.is_file()] == []   # refused before anything was copied

    code, result = p.dr(*args, "--include-external")
    assert code == 0 and result["verified"] == 1 and result["failed"] == 0, result
    row, = copies(p.warehouse, result["run_id"])
    meta = local(row["target_metadata_uri"])
    named = set(extract_references(open_metadata(meta), uri(meta)).physical_files())
    # below the snapshot's target root: <target root>/_external/<scheme>/<path>, A's shared files among them
    external = {u for u in named if u.startswith(row["target_root"] + "/_external/file/")}
    assert external and all(u.startswith(row["target_root"] + "/_external/file" + local(job_dir("A")).as_posix())
                            for u in external), sorted(named)
    assert all(u.startswith(target + "/") and local(u).is_file() for u in named), sorted(named)[:5]

    moved_away = tmp_path / "src-moved-away"
    local(src).rename(moved_away)
    try:
        result, = harness.verify_restore_many(VERSION, [(meta.parent, "chain_claim", "B")])
    finally:
        moved_away.rename(local(src))
    assert result.ok, result.output[-2000:]
