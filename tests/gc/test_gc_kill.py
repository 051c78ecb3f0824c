"""GC killed with SIGKILL mid-deletion, then re-run: it resumes, completes, and `gc_actions`
accounts for every planned file; nothing reachable is lost.

A relocated real store (2.3.0 `failed_and_orphans`) gets 1,500 planted orphans in its job's
`shared/`; GC runs as `spark_jobs/collect_garbage.py` in its own session with a rate limit, so the
deletion takes long enough to be killed half-way (the whole process tree: driver, JVM, workers).
"""
from __future__ import annotations

import os
import time

import pytest

import tests.harness as harness
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, actions, listing, local, pipeline, relocated, runs, uri
from tests.plugins.spark import job_process_env, kill_job_when

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
PLANTED = 1500


def test_sigkill_mid_deletion_then_resume(spark, flink_fixture, tmp_path):
    fx = flink_fixture(VERSION, "failed_and_orphans")
    copy = relocated(fx, tmp_path / "store")
    p = pipeline(spark, tmp_path, [copy])
    job_dir = local(copy + uri(fx.job("A")["job_dir"])[len(uri(fx.root)):])
    old = time.time() - 3600
    for i in range(PLANTED):
        f = job_dir / "shared" / f"planted-{i:05d}"
        f.write_bytes(b"x" * 64)
        os.utime(f, (old, old))
    before = listing(p.roots)
    truth = oracle_references(VERSION, sorted(local(u) for u in before if u.endswith("/_metadata")))
    referenced = {f for files in truth.values() for f in files} | {u for u in before if u.endswith("/_metadata")}
    p.refresh()

    def mid_deletion() -> bool:
        return sum(1 for i in range(PLANTED) if not (job_dir / "shared" / f"planted-{i:05d}").exists()) >= 100

    kill_job_when("collect_garbage", ["--warehouse", p.warehouse.uri, "--mode", "delete", *SHORT,
                                      "--max-deletes-per-second", "60"], mid_deletion,
                  cwd=tmp_path, env=job_process_env(), what="100 planted files deleted", poll=0.5)
    [killed] = [rid for rid, row in newest_rows(p.warehouse).items() if row["status"] == "running"]
    remaining = sum(1 for i in range(PLANTED) if (job_dir / "shared" / f"planted-{i:05d}").exists())
    assert 0 < remaining < PLANTED, "the kill should land mid-deletion"

    code, result = p.gc("--mode", "delete", *SHORT)
    assert code == 0, result
    assert killed in result["resumed"]
    after = listing(p.roots)
    assert referenced & set(before) <= set(after), "a referenced file was lost"
    assert not any(u.rsplit("/", 1)[-1].startswith("planted-") for u in after)
    rows = actions(p.warehouse, killed)
    assert len(rows) >= PLANTED
    assert {r["outcome"] for r in rows} <= {"deleted", "already_gone"}, {r["outcome"] for r in rows}
    assert sum(r["outcome"] == "already_gone" for r in rows) >= PLANTED - remaining - 5
    assert newest_rows(p.warehouse)[killed]["status"] == "completed"


def newest_rows(warehouse) -> dict[str, dict]:
    """Each GC run's newest gc_runs row (the run's state)."""
    out: dict[str, dict] = {}
    for r in runs(warehouse):
        if r["run_id"] not in out or r["finished_at"] >= out[r["run_id"]]["finished_at"]:
            out[r["run_id"]] = r
    return out
