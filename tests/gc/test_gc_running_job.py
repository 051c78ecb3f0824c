"""GC on the root of a Flink job that keeps running and checkpointing.

A real job (incremental RocksDB, num-retained 1, a checkpoint every 200 ms) runs while the full
pipeline (index, chains, GC `--mode delete` with a 3 s grace period) runs on its root, twice. Flink
subsumes and deletes shared files every few hundred milliseconds, so the index is always behind:
the plan is re-checked file by file and the root is listed again for `_metadata` written since
the index. Planted orphans (old mtime) in the job's `shared/` and a dead `chk-N/` must go; no
checkpoint of the job may fail; after it stops its newest checkpoint restores.
"""
from __future__ import annotations

import os
import time

import pytest

import tests.harness as harness
from tests.gc.support import pipeline, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def plant(path, size: int, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    old = time.time() - age_s
    os.utime(path, (old, old))


def test_gc_while_the_job_checkpoints(spark, tmp_path):
    root = tmp_path / "checkpoints"
    root.mkdir()
    p = pipeline(spark, tmp_path, [])
    p.roots = [uri(root)]
    with harness.start_job(VERSION, root, seconds_max=900) as job:
        planted = [job.job_dir / "shared" / f"orphan-{i}" for i in range(3)]
        planted.append(job.job_dir / "chk-1000000" / "dead-upload")
        for f in planted:
            plant(f, 4096, age_s=3600)
        results = []
        for _ in range(2):
            p.refresh()
            code, result = p.gc("--mode", "delete", "--older-than", "3s", "--allow-short-grace")
            assert code == 0, result
            results.append(result)
        stats = job.stop()
    assert stats.failed == 0, stats.failure_reasons
    assert stats.completed >= 10
    assert not any(f.exists() for f in planted), [str(f) for f in planted if f.exists()]
    assert sum(r["deleted"] for r in results) >= len(planted)
    assert all(r["failed"] == 0 for r in results)
    verified = harness.verify_restore(VERSION, stats.newest_checkpoint)
    assert verified.ok, verified.output[-3000:]
