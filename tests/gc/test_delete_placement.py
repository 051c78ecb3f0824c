"""Where GC's delete tasks get their keys (statekeeper.gc.execute.placed): spread by key where the delete is
conditional on the planned version, kept with their directory where the re-check needs it together."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from statekeeper.gc.execute import placed
from statekeeper.storage import StorageConfig

PARTITIONS = 4
# A job whose shared/ holds most of its garbage (as Flink's incremental checkpoints leave it), and a small one.
DIRS = {"job-a/shared": 400, "job-b/shared": 12, "job-b/chk-7": 3}


def _plan(spark, root: str):
    rows = [(f"{root}/{d}/f{i:04d}", 64, datetime(2026, 1, 1, tzinfo=timezone.utc), f"e{i}", 1, "r1",
             "b" if root.startswith("s3") else "", f"{d}/f{i:04d}") for d, n in DIRS.items() for i in range(n)]
    return spark.createDataFrame(rows, "uri string, size long, mtime timestamp, etag string, delete_order int, "
                                       "root_id string, bucket string, relative_path string")


def _partitions(spark, plan, storage: StorageConfig) -> list[dict[str, int]]:
    """Per partition: directory -> keys placed there."""
    from pyspark.sql import functions as F

    rows = (placed(plan, storage, PARTITIONS)
            .select(F.spark_partition_id().alias("p"),
                    F.regexp_replace("relative_path", r"/[^/]*$", "").alias("dir"))
            .groupBy("p", "dir").count().collect())
    out: list[dict[str, int]] = [{} for _ in range(PARTITIONS)]
    for r in rows:
        out[r["p"]][r["dir"]] = r["count"]
    return out


def test_conditional_deletes_are_spread_by_key_so_a_large_directory_does_not_hold_one_task(spark):
    parts = _partitions(spark, _plan(spark, "s3://b/cp"), StorageConfig())   # S3 default: precondition
    sizes = [sum(p.values()) for p in parts]
    assert sum(sizes) == sum(DIRS.values())
    # By directory, job-a/shared's 400 keys would be one partition; by key each gets a share of it.
    assert all(p.get("job-a/shared", 0) >= 50 for p in parts), parts
    assert max(sizes) < 200, sizes


@pytest.mark.parametrize("root, storage", [
    ("s3://b/cp", StorageConfig(delete_recheck="listing")),   # an S3-compatible store that ignores preconditions
    ("oss://b/cp", StorageConfig()),                          # OSS: re-checked by listing by default
    ("file:///data/cp", StorageConfig()),                     # local: chk-N/ removed after its last file
], ids=["s3-listing", "oss-listing", "local"])
def test_a_directory_stays_in_one_task_where_the_recheck_lists_or_removes_it(spark, root, storage):
    parts = _partitions(spark, _plan(spark, root), storage)
    for d, n in DIRS.items():
        holders = [p[d] for p in parts if d in p]
        assert holders == [n], (d, parts)
