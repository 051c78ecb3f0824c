"""Which retained snapshots the retention policy expires, decided per job directory.

One rule set, expressed as Spark column logic over `snapshots` (a window per job directory: no
job's snapshots ever leave their partition, nothing is collected):

* checkpoints are ranked per job directory (root, `spark_locate.job_of`: the chk-N/ of a root that is a
  job's own directory are that one job's) by checkpoint id, newest first; rank 1 (the newest) is never
  expired;
* `retain_last N`: ranks above N expire;
* `inactive_after D` / `inactive_retain K`: in a job whose newest checkpoint's `_metadata` is older
  than D, ranks above K expire;
* savepoints expire only with `expire_savepoints_older_than`, by their `_metadata` age;
* nothing younger than the grace period expires (by its `_metadata` mtime).

Expiring a snapshot only removes its `_metadata` from the reachable roots; which of its files go
is decided by the sweep (`statekeeper.gc.plan`), from what every remaining snapshot references.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from statekeeper.gc.options import RetentionPolicy
from statekeeper.layout.spark_locate import job_of
from statekeeper.tables.vocabulary import LayoutKind, SnapshotType


class ExpiryRule:
    """Why a snapshot expired (gc_actions.message of its `_metadata`)."""

    RETAIN_LAST = "beyond the newest {n} checkpoints of its job (--retain-last)"
    INACTIVE = "job inactive since {since}; beyond its newest {n} checkpoints (--inactive-after)"
    SAVEPOINT = "savepoint older than {age} (--expire-savepoints-older-than)"


def expired_snapshots(snapshots: Any, policy: RetentionPolicy, now: datetime, grace_cutoff: datetime) -> Any:
    """DataFrame (uri, root, root_id, job_dir, rule) of the snapshots `policy` expires."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = snapshots.sparkSession
    empty = spark.createDataFrame([], "uri string, root string, root_id string, job_dir string, rule string")
    if not policy.expires_anything:
        return empty

    is_savepoint = ((F.col("snapshot_type") == SnapshotType.SAVEPOINT.value)
                    | (F.col("layout_kind") == LayoutKind.SAVEPOINT_METADATA.value))
    old_enough = F.col("metadata_mtime") < F.lit(grace_cutoff)
    frames = []

    if policy.retain_last is not None or policy.inactive_after is not None:
        by_job = Window.partitionBy("root_id", job_of("job_dir"))
        ranked = (snapshots.where(~is_savepoint)
                  .withColumn("rank", F.row_number().over(
                      by_job.orderBy(F.col("checkpoint_id").desc_nulls_last(), F.col("metadata_mtime").desc())))
                  .withColumn("newest_mtime", F.max("metadata_mtime").over(by_job)))
        rule = F.lit(None).cast("string")
        if policy.inactive_after is not None:
            inactive = F.col("newest_mtime") < F.lit(now - policy.inactive_after)
            rule = F.when(inactive & (F.col("rank") > policy.inactive_retain),
                          F.format_string(ExpiryRule.INACTIVE.format(since="%s", n=policy.inactive_retain),
                                          F.date_format("newest_mtime", "yyyy-MM-dd'T'HH:mm:ssX")))
        if policy.retain_last is not None:
            rule = F.coalesce(rule, F.when(F.col("rank") > policy.retain_last,
                                           F.lit(ExpiryRule.RETAIN_LAST.format(n=policy.retain_last))))
        frames.append(ranked.where((F.col("rank") > 1) & old_enough)
                      .withColumn("rule", rule).where(F.col("rule").isNotNull()))

    if policy.expire_savepoints_older_than is not None:
        from statekeeper.units import format_duration

        cutoff = min(now - policy.expire_savepoints_older_than, grace_cutoff)
        frames.append(snapshots.where(is_savepoint & (F.col("metadata_mtime") < F.lit(cutoff)))
                      .withColumn("rule", F.lit(ExpiryRule.SAVEPOINT.format(
                          age=format_duration(policy.expire_savepoints_older_than)))))

    out = empty
    for frame in frames:
        out = out.unionByName(frame.select("uri", "root", "root_id", "job_dir", "rule"))
    return out
