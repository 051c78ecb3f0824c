"""DR follow mode behind a real Flink job that keeps checkpointing: copies that trail it by one round.

A live job (incremental RocksDB, a checkpoint every second, 30 retained, so Flink subsumes and deletes one
checkpoint every second) is CLAIM-restored from another live job's retained checkpoint: its checkpoints keep
naming that job's `shared/` files (FLINK-24149; FIFO compaction keeps them from being rewritten), so every
closure spans two job directories. Follow rounds run back to back for `STATEKEEPER_FOLLOW_LIVE_SECONDS`
(default 150) while it runs. Every round must publish a copy or say why (a note for a checkpoint Flink
subsumed mid-copy); the lag from completion at the source to the verified target `_metadata` is reported
(p50, p95, max). The newest copy at three moments of the run and the final copy after the job stopped
restore in real Flink, in one JVM, with the source moved away: earlier copies stay intact at the target,
since nothing there is deleted.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrMode, DrOptions, TargetSpec
from tests.index.support import run_index
from tests.replicate.support import local, table, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
SECONDS = float(os.environ.get("STATEKEEPER_FOLLOW_LIVE_SECONDS", "150"))
# FIFO compaction never rewrites an SST, so the restored job keeps naming its parent's shared/ files. A checkpoint
# must outlive the round that copies it (its MANIFEST and the like go when Flink subsumes it): 30 retained at one
# per second live 30 s, against about 10 s for a round (docs/dr-copy.md, "Follow mode").
LIVE = {"interval_ms": 1000, "retained": 30, "compaction_style": "FIFO"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def test_follow_rounds_trail_a_live_claim_restored_job(spark, tmp_path, capsys):
    root = tmp_path / "checkpoints"
    with harness.start_job(VERSION, root, params=LIVE) as parent:
        time.sleep(3)
        parent_stats = parent.stop()
    assert parent_stats.ok, parent_stats
    parent_dir = parent_stats.job_dir.name
    warehouse = tmp_path / "warehouse"
    from statekeeper.tables import Warehouse

    wh = Warehouse(str(warehouse))
    index = run_index(spark, [uri(root)], wh)        # where follow rounds learn their roots
    assert index.status == "succeeded", index.summary()
    target = uri(tmp_path / "dr")
    options = DrOptions(mode=DrMode.FOLLOW, targets=TargetSpec.parse([target]), allowed_targets=(target,))

    def follow_round():
        return CopyToDr(spark).warehouse(wh).progress_interval(0).configure(options).execute()

    rounds, moments = [], []
    with harness.start_job(VERSION, root, restore_from=parent_stats.newest_checkpoint, claim_mode="CLAIM",
                           params=LIVE, seconds_max=SECONDS + 300) as job:
        began = time.monotonic()
        while time.monotonic() - began < SECONDS:
            rounds.append(follow_round())
            if len(moments) < 3 and time.monotonic() - began >= SECONDS * (len(moments) + 1) / 4:
                moments.append(_newest_copy(wh, job.job_dir.name))      # the newest copy at this moment
        stats = job.stop()
    assert stats.ok and stats.completed >= SECONDS / 2, stats
    rounds.append(follow_round())                  # the job stopped: its final retained checkpoint
    final = _newest_copy(wh, job.job_dir.name)
    assert final["checkpoint_id"] == int(stats.newest_checkpoint.name[4:]), (final, stats)

    # every round published a copy or said why; none refused anything
    for r in rounds:
        assert r.status == "succeeded" and not r.problems, r.summary()
        assert r.verified >= 1 or r.notes, r.summary()
    published = [r for r in rounds if r.verified]
    assert len(published) >= len(rounds) * 2 // 3, [r.summary() for r in rounds]

    rows = [r for r in table(wh, "dr_copies") if r["job_dir"] == job.job_dir.name and r["status"] == "verified"]
    lags = [(r["published_at"] - r["source_completed_at"]).total_seconds() for r in rows]
    assert all(lag > 0 for lag in lags), lags
    with capsys.disabled():
        print(f"\n[follow live] {len(rounds)} rounds in {SECONDS:.0f} s ({stats.completed} checkpoints), "
              f"{len(published)} published, {sum(bool(r.notes) for r in rounds)} with a checkpoint subsumed "
              f"mid-copy; lag from completion to verified target _metadata: p50 {_percentile(lags, 0.5):.1f} s, "
              f"p95 {_percentile(lags, 0.95):.1f} s, max {max(lags):.1f} s")

    # each copy's closure spans both job directories: the parent's shared/ files came along
    spans = {c["target_metadata_uri"]: _spans(wh, c) for c in [*moments, final]}
    assert all(parent_dir in dirs and job.job_dir.name in dirs for dirs in spans.values()), spans

    # the copies of three moments and the final one restore from the target alone
    root.rename(tmp_path / "source-moved-away")
    cases = [(local(c["target_metadata_uri"]).parent, "incremental", "A") for c in [*moments, final]]
    assert len(cases) == 4 and len({c[0] for c in cases}) == 4, cases
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(c[0]), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed


def _newest_copy(wh, job_dir: str) -> dict:
    rows = [r for r in table(wh, "dr_copies") if r["job_dir"] == job_dir and r["status"] == "verified"]
    assert rows, f"no verified copy of {job_dir} yet"
    return max(rows, key=lambda r: r["checkpoint_id"])


def _spans(wh, copy: dict) -> set[str]:
    """The job directories (below the target root) of the objects a copy consists of (dr_files)."""
    base = copy["target_root"].rstrip("/") + "/"
    return {f["target_uri"][len(base):].split("/", 1)[0] for f in table(wh, "dr_files")
            if f["target_metadata_uri"] == copy["target_metadata_uri"] and f["target_uri"].startswith(base)}
