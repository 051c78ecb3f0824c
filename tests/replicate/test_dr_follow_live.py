"""DR follow mode behind a real Flink job that keeps checkpointing: copies that trail it by one round.

A live job (incremental RocksDB, a checkpoint every second, 30 retained, so Flink subsumes and deletes one
checkpoint every second) is CLAIM-restored from another live job's retained checkpoint: its checkpoints keep
naming that job's `shared/` files (FLINK-24149; FIFO compaction keeps them from being rewritten), so every
closure spans two job directories. Follow rounds run back to back while it runs, for
`STATEKEEPER_FOLLOW_LIVE_SECONDS` (default 30) and on until three moments of the run have a copy of their own and
a round has started after Flink subsumed the CLAIM-restored checkpoint (its `_metadata` gone, about 30 s in: from
then on Flink deletes a checkpoint every second while rounds copy; on 2 cores under a load of 7-9: 4 rounds in
102 s on local disk and 5 in 68 s on S3, 2 of each begun while Flink subsumed). Every round must publish
a copy or say why (a note for a checkpoint Flink subsumed mid-copy); the lag from completion at the source to
the verified target `_metadata` is reported (p50, p95, max). The newest copy at three moments of the run and
the final copy after the job stopped restore in real Flink, in one JVM, with the source moved away: earlier
copies stay intact at the target, since nothing there is deleted.

On S3 the same, Flink checkpointing straight into a bucket of the session's SeaweedFS through its own S3
filesystem plugin (tests/harness/s3_plugin.py: Flink's write order, its deletes, SeaweedFS's listings), copied to a
bucket of a second SeaweedFS (another endpoint, other data). The DR bucket then comes down to local disk as plain
objects, each `_metadata` rewritten into the download (which refuses a path outside the DR prefix), and the four
copies restore there: what a restore in the DR region starts from, with nothing of the source bucket reachable. (Copying the copies down with the DR copy itself added an
index, chains, validation and copy run and proved nothing about the follow copies: test_dr_s3.py proves that path,
and tests/replicate/test_dr_rules.py the explicit `--snapshot` copy.)
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.replicate.job import CopyToDr
from statekeeper.replicate.options import DrMode, DrOptions, TargetSpec
from statekeeper.storage import RoutingFileIO, StorageConfig
from statekeeper.tables import Warehouse
from tests.compact.support import download_store
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket
from tests.plugins.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS
from tests.replicate.support import local, table, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
# The least time rounds run; the loop goes on until Flink subsumes the CLAIM-restored checkpoint (about 30 s in,
# LIVE) and a round started after that, so 30 s cost nothing the proof needs (60 s ran 30 s more of the same rounds).
SECONDS = float(os.environ.get("STATEKEEPER_FOLLOW_LIVE_SECONDS", "30"))
# FIFO compaction never rewrites an SST, so the restored job keeps naming its parent's shared/ files. A checkpoint
# must outlive the round that copies it (its MANIFEST and the like go when Flink subsumes it): 30 retained at one
# per second live 30 s, against about 10 s for a round (docs/dr-copy.md, "Follow mode").
LIVE = {"interval_ms": 1000, "retained": 30, "compaction_style": "FIFO"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def test_follow_rounds_trail_a_live_claim_restored_job(spark, tmp_path, capsys):
    _follow_live(spark, tmp_path, capsys)


@pytest.mark.s3
def test_follow_rounds_trail_a_live_job_from_one_s3_endpoint_to_another(spark, tmp_path, capsys, seaweedfs,
                                                                        second_seaweedfs):
    _follow_live(spark, tmp_path, capsys, s3=(seaweedfs, second_seaweedfs.config()))


def _follow_live(spark, tmp_path: Path, capsys, s3: tuple[SeaweedFS, StorageConfig] | None = None) -> None:
    root: Path | str = tmp_path / "checkpoints"
    storage, target_storage, flink_s3 = StorageConfig(), None, None
    source, target = uri(root), uri(tmp_path / "dr")
    if s3 is not None:
        server, target_storage = s3
        storage = server.config()
        flink_s3 = harness.S3Endpoint(server.endpoint, ACCESS_KEY, SECRET_KEY)
        root = source = f"s3://{make_bucket(storage, 'live')}/checkpoints"
        target = f"s3://{make_bucket(target_storage, 'dr')}/flink"
    else:
        root.mkdir()
    fio = RoutingFileIO(storage)
    with harness.start_job(VERSION, root, params=LIVE, s3=flink_s3) as parent:   # returns once chk-1/_metadata exists
        # One more second: its retained checkpoint then names ~12 SSTs in shared/ (each above the 20 KiB inline
        # threshold, measured: chk-1 alone names 8), which the restored job's closures keep naming.
        time.sleep(1)
        parent_stats = parent.stop()
    assert parent_stats.ok, parent_stats
    parent_dir = _name(parent_stats.job_dir)
    # In CLAIM mode Flink owns the restored checkpoint and subsumes it like its own: when its _metadata is gone,
    # Flink is deleting one checkpoint a second (retained 30 at one a second: about 30 s after the start).
    claimed = f"{uri(parent_stats.newest_checkpoint) if s3 is None else parent_stats.newest_checkpoint}/_metadata"
    wh = Warehouse(str(tmp_path / "warehouse"))
    index = run_index(spark, [source], wh, storage=storage)        # where follow rounds learn their roots
    assert index.status == "succeeded", index.summary()
    options = DrOptions(mode=DrMode.FOLLOW, targets=TargetSpec.parse([target]), allowed_targets=(target,))

    def follow_round():
        return (CopyToDr(spark).warehouse(wh).storage(storage).progress_interval(0).configure(options)
                .target_storage(target_storage).execute())

    rounds, moments, while_subsuming = [], [], 0
    with harness.start_job(VERSION, root, restore_from=parent_stats.newest_checkpoint, claim_mode="CLAIM",
                           params=LIVE, seconds_max=3 * SECONDS + 300, s3=flink_s3) as job:
        job_dir = _name(job.job_dir)
        began = time.monotonic()
        # Rounds for SECONDS, then on (up to 3 x SECONDS) until three moments have a copy of their own and a round
        # ran wholly while Flink deleted subsumed checkpoints, so that a round slowed by a busy machine, or one
        # whose checkpoint Flink subsumed mid-copy, cannot fail the test, and the rounds do run under deletion.
        while time.monotonic() - began < (SECONDS if len(moments) == 3 and while_subsuming else 3 * SECONDS):
            subsuming = not fio.exists(claimed)
            rounds.append(follow_round())
            while_subsuming += subsuming
            if len(moments) < 3 and time.monotonic() - began >= SECONDS * (len(moments) + 1) / 4:
                # The newest copy at this moment, once there is one newer than the last moment's: a short
                # run's first quarter can end before the first round on S3 has published.
                newest = _newest_copy(wh, job_dir, required=False)
                if newest is not None and (not moments or newest["checkpoint_id"] > moments[-1]["checkpoint_id"]):
                    moments.append(newest)
        elapsed = time.monotonic() - began
        stats = job.stop()
    assert stats.ok and stats.completed >= SECONDS / 2, stats
    assert while_subsuming and not fio.exists(claimed), f"no round started after Flink subsumed {claimed}"
    rounds.append(follow_round())                  # the job stopped: its final retained checkpoint
    final = _newest_copy(wh, job_dir)
    assert final["checkpoint_id"] == int(_name(stats.newest_checkpoint)[4:]), (final, stats)

    # every round published a copy or said why; none refused anything
    for r in rounds:
        assert r.status == "succeeded" and not r.problems, r.summary()
        assert r.verified >= 1 or r.notes, r.summary()
    published = [r for r in rounds if r.verified]
    assert len(published) >= len(rounds) * 2 // 3, [r.summary() for r in rounds]

    rows = [r for r in table(wh, "dr_copies") if r["job_dir"] == job_dir and r["status"] == "verified"]
    lags = [(r["published_at"] - r["source_completed_at"]).total_seconds() for r in rows]
    assert all(lag > 0 for lag in lags), lags
    with capsys.disabled():
        print(f"\n[follow live{' s3' if s3 else ''}] {len(rounds)} rounds in {elapsed:.0f} s ({stats.completed} "
              f"checkpoints), {len(published)} published, {while_subsuming} begun while Flink subsumed, "
              f"{sum(bool(r.notes) for r in rounds)} with a checkpoint subsumed mid-copy; lag from completion to "
              f"verified target _metadata: p50 "
              f"{_percentile(lags, 0.5):.1f} s, p95 {_percentile(lags, 0.95):.1f} s, max {max(lags):.1f} s")

    # The run's first copy spans both job directories: the parent's shared/ files came along. Later ones may
    # no longer name them: FIFO compaction drops the oldest SSTs, the parent's first, once the job has run long
    # enough (a run slowed by a busy machine, 46 checkpoints, had a final copy of the job's own files only). Every
    # copy holds the job's own files and none of a third directory; the restores below show each is complete.
    kept = [*moments, final]
    spans = {c["target_metadata_uri"]: _spans(wh, c) for c in kept}
    # The first copy of the run spans both: on an idle machine the job reached chk-36 before the first moment, by
    # when FIFO compaction had dropped the parent's SSTs from the closure, so the first moment is not the witness.
    first = min(rows, key=lambda r: r["checkpoint_id"])
    assert _spans(wh, first) == {parent_dir, job_dir}, (first["target_metadata_uri"], spans)
    assert all(job_dir in dirs and dirs <= {parent_dir, job_dir} for dirs in spans.values()), spans

    # the copies of three moments and the final one restore from the target alone
    metadata = [c["target_metadata_uri"] for c in kept]
    if s3 is None:
        root.rename(tmp_path / "source-moved-away")
    else:
        # what a restore in the DR region starts from: the DR bucket's objects, downloaded and restored with no S3
        # plugin configured in the verifier's JVM, so a reference left pointing at the source bucket fails it
        down = download_store(target, tmp_path / "restored", RoutingFileIO(target_storage))
        metadata = [down + m[len(target):] for m in metadata]
    cases = [(local(m).parent, "incremental", "A") for m in metadata]
    assert len(cases) == 4 and len({c[0] for c in cases}) == 4, cases
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(c[0]), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed


def _name(path: Path | str) -> str:
    """The last segment of a local path or an s3:// URI (a job directory, a chk-N)."""
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def _newest_copy(wh, job_dir: str, *, required: bool = True) -> dict | None:
    rows = [r for r in table(wh, "dr_copies") if r["job_dir"] == job_dir and r["status"] == "verified"]
    assert rows or not required, f"no verified copy of {job_dir} yet"
    return max(rows, key=lambda r: r["checkpoint_id"]) if rows else None


def _spans(wh, copy: dict) -> set[str]:
    """The job directories (below the target root) of the objects a copy consists of (dr_files)."""
    base = copy["target_root"].rstrip("/") + "/"
    return {f["target_uri"][len(base):].split("/", 1)[0] for f in table(wh, "dr_files")
            if f["target_metadata_uri"] == copy["target_metadata_uri"] and f["target_uri"].startswith(base)}
