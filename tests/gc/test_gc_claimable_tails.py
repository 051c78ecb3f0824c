"""The claimable-tail rule on small hand-made tables (the real-Flink proofs: tests/gc/test_gc_split_roots.py's
RocksDB twin, tests/flink2/test_flink2_split_roots.py).

A job restored in CLAIM mode from another job's newest checkpoint, in a root the GC run was not given, keeps
using files only that checkpoint named; Flink deleted the checkpoint, and when the old job retains older ones
its directory is not ownerless. Those files are newer than the old job's newest retained `_metadata`: that
tail is held back unless a failed checkpoint right after the newest explains it, or the roots are complete.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from statekeeper.gc import plan
from statekeeper.tables.vocabulary import FileKind

pytestmark = [pytest.mark.spark]

NOW = datetime(2026, 11, 26, 12, tzinfo=timezone.utc)
GRACE = NOW - timedelta(days=3)
T_CHECKPOINT, T_BEFORE, T_AFTER = NOW - timedelta(days=5), NOW - timedelta(days=6), NOW - timedelta(days=4)
TAIL, FAILED_NEXT, GAP = "a" * 32, "b" * 32, "c" * 32

FILES = "uri string, root string, root_id string, job_dir string, bucket string, relative_path string, kind string, " \
        "job_id string, checkpoint_id long, size long, mtime timestamp, etag string"
SNAPSHOTS = "uri string, root_id string, job_dir string, snapshot_type string, checkpoint_id long, " \
            "metadata_mtime timestamp, layout_kind string"
REFERENCES = "snapshot_uri string, root_id string, job_dir string, file_uri string, file_kind string"


def _file(job: str, rel: str, kind: FileKind, mtime: datetime, checkpoint_id: int | None = None,
          size: int = 10) -> tuple:
    return (f"file:///r/{job}/{rel}", "file:///r", "r", job, "00", f"{job}/{rel}", kind.value, job, checkpoint_id,
            size, mtime.replace(tzinfo=None), None)


def _checkpoint(job: str, n: int) -> tuple:
    return _file(job, f"chk-{n}/_metadata", FileKind.CHECKPOINT_METADATA, T_CHECKPOINT, n)


@pytest.fixture(scope="module")
def tables(spark):
    files = []
    for job in (TAIL, FAILED_NEXT, GAP):
        files += [_checkpoint(job, 3),
                  _file(job, "shared/before", FileKind.SHARED, T_BEFORE),       # subsumed garbage: always planned
                  _file(job, "shared/after", FileKind.SHARED, T_AFTER, size=100),
                  _file(job, "taskowned/after", FileKind.TASK_OWNED, T_AFTER, size=1000)]
    files += [_file(FAILED_NEXT, "chk-4/exclusive", FileKind.EXCLUSIVE, T_AFTER, 4),   # the next checkpoint failed
              _file(GAP, "chk-5/exclusive", FileKind.EXCLUSIVE, T_AFTER, 5)]           # chk-4 completed, then went
    snapshots = [(f"file:///r/{job}/chk-3/_metadata", "r", job, "checkpoint", 3, T_CHECKPOINT.replace(tzinfo=None),
                  "checkpoint_metadata") for job in (TAIL, FAILED_NEXT, GAP)]
    return (spark.createDataFrame(files, FILES), spark.createDataFrame(snapshots, SNAPSHOTS),
            spark.createDataFrame([], REFERENCES))


def _plan(tables, roots_complete: bool) -> tuple[set[str], dict[tuple[str, str], tuple[int, int]]]:
    files, snapshots, references = tables
    expired = files.sparkSession.createDataFrame([], "uri string, root string, root_id string, job_dir string, "
                                                     "rule string")
    swept = plan.sweep_all(plan.SweepInputs(files, snapshots, references), expired, run_id="gc-1", grace_cutoff=GRACE)
    ownerless = plan.ownerless_dirs(files, snapshots, plan.OwnerlessRule(roots_complete))
    tails = plan.claimable_tails(files, snapshots, roots_complete)
    planned = {r["relative_path"] for r in plan.withhold(swept, ownerless, tails).collect()}
    named = {}
    for r in plan.tail_rows(swept, tails).collect():
        files_, bytes_ = named.get((r["job"], r["verdict"]), (0, 0))
        named[(r["job"], r["verdict"])] = (files_ + 1, bytes_ + r["size"])
    return planned, named


def test_a_tail_no_failed_checkpoint_explains_is_held_back_and_named(tables):
    planned, named = _plan(tables, roots_complete=False)
    for job in (TAIL, GAP):
        assert f"{job}/shared/before" in planned
        assert f"{job}/shared/after" not in planned and f"{job}/taskowned/after" not in planned, planned
        assert named[(job, "held_back")] == (2, 1100), named
    # a failed chk-N/ of the gap job is still collected: only the files a claimed checkpoint may use are held
    assert f"{GAP}/chk-5/exclusive" in planned


def test_a_failed_checkpoint_right_after_the_newest_explains_the_tail(tables):
    planned, named = _plan(tables, roots_complete=False)
    assert {f"{FAILED_NEXT}/shared/before", f"{FAILED_NEXT}/shared/after", f"{FAILED_NEXT}/taskowned/after",
            f"{FAILED_NEXT}/chk-4/exclusive"} <= planned, planned
    assert not [k for k in named if k[0] == FAILED_NEXT], named


def test_with_the_roots_declared_complete_every_tail_is_planned_and_named_so(tables):
    planned, named = _plan(tables, roots_complete=True)
    for job in (TAIL, GAP):
        assert {f"{job}/shared/after", f"{job}/taskowned/after"} <= planned, planned
        assert named[(job, "roots_complete")] == (2, 1100), named
    assert not [k for k in named if k[1] == "held_back"], named
