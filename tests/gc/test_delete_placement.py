"""Where GC's delete tasks get their keys (statekeeper.gc.execute.placed): spread by key below the roots whose
store's self-test proved the conditional delete, kept with their directory where the re-check needs it together
(a store that ignores the precondition or was not tested, OSS by default, local disks)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from statekeeper.gc.execute import placed

PARTITIONS = 4
# A job whose shared/ holds most of its garbage (as Flink's incremental checkpoints leave it), and a small one.
DIRS = {"job-a/shared": 400, "job-b/shared": 12, "job-b/chk-7": 3}


def _plan(spark, root: str):
    rows = [(f"{root}/{d}/f{i:04d}", 64, datetime(2026, 1, 1, tzinfo=timezone.utc), f"e{i}", 1, "r1",
             "b" if root.startswith("s3") else "", f"{d}/f{i:04d}") for d, n in DIRS.items() for i in range(n)]
    return spark.createDataFrame(rows, "uri string, size long, mtime timestamp, etag string, delete_order int, "
                                       "root_id string, bucket string, relative_path string")


def _partitions(spark, plan, spread: list[str]) -> list[dict[str, int]]:
    """Per partition: directory -> keys placed there."""
    from pyspark.sql import functions as F

    rows = (placed(plan, spread, PARTITIONS)
            .select(F.spark_partition_id().alias("p"),
                    F.regexp_replace("relative_path", r"/[^/]*$", "").alias("dir"))
            .groupBy("p", "dir").count().collect())
    out: list[dict[str, int]] = [{} for _ in range(PARTITIONS)]
    for r in rows:
        out[r["p"]][r["dir"]] = r["count"]
    return out


def test_conditional_deletes_are_spread_by_key_so_a_large_directory_does_not_hold_one_task(spark):
    parts = _partitions(spark, _plan(spark, "s3://b/cp"), ["r1"])   # the store's self-test proved the precondition
    sizes = [sum(p.values()) for p in parts]
    assert sum(sizes) == sum(DIRS.values())
    # By directory, job-a/shared's 400 keys would be one partition; by key each gets a share of it.
    assert all(p.get("job-a/shared", 0) >= 50 for p in parts), parts
    assert max(sizes) < 200, sizes


@pytest.mark.parametrize("root, spread", [
    ("s3://b/cp", []),            # an S3-compatible store that ignores the precondition: re-checked by listing
    ("s3://b/cp", ["other"]),     # another root's store proved it, this one's did not
    ("file:///data/cp", []),      # local: chk-N/ removed after its last file
], ids=["s3-listing", "s3-other-root", "local"])
def test_a_directory_stays_in_one_task_where_the_recheck_lists_or_removes_it(spark, root, spread):
    parts = _partitions(spark, _plan(spark, root), spread)
    for d, n in DIRS.items():
        holders = [p[d] for p in parts if d in p]
        assert holders == [n], (d, parts)
