"""Driver-side planning: which bucket partitions a run covers and how they are spread over tasks."""
from __future__ import annotations

import pyarrow as pa
import pytest

from statekeeper.index.bucket import BucketPlan
from statekeeper.index.planner import PlannedBucket, balance, plan_buckets
from statekeeper.storage import LocalFileIO, Root, Roots
from statekeeper.tables.catalog import JOB_BUCKETS, job_bucket
from statekeeper.tables.delta_log import TableState
from statekeeper.tables.files import DataFile


def bucket(name: str, weight: int, jobs: int = 1) -> PlannedBucket:
    return PlannedBucket(BucketPlan(Root("file:///r"), name, [f"{name}-{i}" for i in range(jobs)], {}), weight)


def test_balance_spreads_by_expected_size():
    buckets = [bucket("big", 1000), bucket("a", 10), bucket("b", 10), bucket("c", 10), bucket("d", 500),
               bucket("e", 490)]
    bins = balance(buckets, 3)
    loads = sorted(sum(b.weight for b in group) for group in bins)
    assert len(bins) == 3 and loads == [510, 510, 1000]
    assert sorted(b.plan.bucket for g in bins for b in g) == sorted(b.plan.bucket for b in buckets)


def test_balance_first_run_spreads_by_job_count():
    bins = balance([bucket(str(i), 0) for i in range(10)], 4)
    assert sorted(len(b) for b in bins) == [2, 2, 3, 3]
    assert balance([], 4) == [] and len(balance([bucket("x", 0)], 8)) == 1
    # Without history, a bucket of many job dirs weighs more than one of a single job dir.
    bins = balance([bucket("many", 0, jobs=6), *(bucket(str(i), 0) for i in range(6))], 2)
    with_many = next(g for g in bins if any(b.plan.bucket == "many" for b in g))
    assert len(with_many) < 7 - len(with_many)


def test_job_bucket_is_stable_and_bounded():
    # CRC-32, not hash(): the same name lands in the same bucket in every process, forever.
    assert job_bucket("0123456789abcdef0123456789abcdef") == job_bucket("0123456789abcdef0123456789abcdef")
    assert job_bucket(".") == f"{__import__('zlib').crc32(b'.') % JOB_BUCKETS:02d}"
    values = {job_bucket(f"{i:032x}") for i in range(2000)}
    assert values == {f"{i:02d}" for i in range(JOB_BUCKETS)}


def _state(name: str, root: Root, job_dirs: list[str]) -> TableState:
    files = tuple(DataFile(f"p/{j}.parquet", 1, {"root_id": root.root_id, "bucket": job_bucket(j)}, 0, 7)
                  for j in job_dirs)
    return TableState(f"file:///wh/{name}", 3, pa.schema([]), ("root_id", "bucket"), files)


def test_plan_buckets_covers_children_root_files_and_previous_buckets(tmp_path):
    (tmp_path / "r" / "job1" / "chk-1").mkdir(parents=True)
    (tmp_path / "r" / "savepoint-abcdef-0123456789ab").mkdir()
    roots = Roots([str(tmp_path / "r")])
    root = next(iter(roots))
    current = [".", "job1", "savepoint-abcdef-0123456789ab"]
    gone = next(f"gone-{i}" for i in range(100) if job_bucket(f"gone-{i}") not in {job_bucket(n) for n in current})
    states = {"files": _state("files", root, ["job1", gone]), "snapshots": None}
    planned = plan_buckets(LocalFileIO(), roots, states)
    by_bucket = {p.plan.bucket: p for p in planned}
    assert sorted(by_bucket) == sorted({job_bucket(n) for n in [*current, gone]})
    assert sorted(j for p in planned for j in p.plan.job_dirs) == sorted(current)
    for name in current:
        assert name in by_bucket[job_bucket(name)].plan.job_dirs
    # The vanished job's bucket is planned (its rows must go) with no current job dir.
    assert by_bucket[job_bucket(gone)].plan.job_dirs == []
    assert by_bucket[job_bucket(gone)].plan.previous["files"][0].path == f"p/{gone}.parquet"
    assert by_bucket[job_bucket("job1")].weight == 7
    filtered = plan_buckets(LocalFileIO(), roots, states, job_filter="job*")
    assert sorted(j for p in filtered for j in p.plan.job_dirs) == ["job1"]
    assert all(p.plan.job_filter == "job*" for p in filtered)
    assert not filtered[0].plan.in_scope(".") and filtered[0].plan.in_scope("job2")


def test_plan_buckets_refuses_missing_root(tmp_path):
    from statekeeper.storage import RootNotFoundError

    with pytest.raises(RootNotFoundError):
        plan_buckets(LocalFileIO(), Roots([str(tmp_path / "absent")]), {})
