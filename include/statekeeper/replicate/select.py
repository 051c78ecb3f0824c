"""Which snapshots a DR run copies, in Spark: candidates ranked per copy group.

A *group* is what one copy stands for: a job directory (its latest restorable checkpoint, with older
restorable checkpoints as fallbacks when a running job subsumes the newer one mid-copy), a savepoint,
or an explicitly requested snapshot. Rank 0 is the first choice; validation's `restorable` verdict is
the only way in, so a snapshot validation calls broken is never copied.
"""
from __future__ import annotations

from typing import Any

from statekeeper.jobs import selection
from statekeeper.layout.spark_locate import job_of
from statekeeper.replicate.options import DrOptions, SavepointPolicy
from statekeeper.tables.vocabulary import DrSelectedBy, SnapshotStatus, SnapshotType, UnitKind

CANDIDATE_COLUMNS = ("group_key", "rank", "selected_by", "snapshot_uri", "root", "root_id", "job_dir", "bucket",
                     "job_id", "checkpoint_id", "snapshot_type", "metadata_etag", "metadata_mtime")


def restorable_snapshots(results: Any, snapshots: Any) -> Any:
    """Every snapshot validation found restorable, with the index's identity of its `_metadata`."""
    from pyspark.sql import functions as F

    ok = selection.verdicts(results).where(F.col("restorable")).select("snapshot_uri").distinct()
    # A checkpoint written straight into the root (chk-N without a job-id level) belongs to the root's own
    # job directory, "." as validation_jobs names it: by its chk-N name no job matched it, and the run copied
    # nothing and called that a success.
    job_dir = job_of("job_dir").alias("job_dir")
    return (snapshots.where(F.col("status") == SnapshotStatus.OK.value)
            .join(ok.withColumnRenamed("snapshot_uri", "uri"), "uri", "left_semi")
            .select(F.col("uri").alias("snapshot_uri"), "root", "root_id", job_dir, "bucket", "job_id",
                    "checkpoint_id", "snapshot_type", "metadata_etag", "metadata_mtime"))


def candidates(options: DrOptions, results: Any, jobs: Any, snapshots: Any) -> Any:
    """CANDIDATE_COLUMNS rows: every group's candidates, rank 0 first (at most max_fallbacks + 1 each)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ok = restorable_snapshots(results, snapshots)
    if options.job_filter:
        ok = ok.where(selection.job_dir_matches(options.job_filter))
    if options.snapshots:
        wanted = F.col("snapshot_uri").isin(list(options.snapshots))
        return _single(ok.where(wanted), DrSelectedBy.EXPLICIT)

    job_dirs = jobs.where(F.col("kind") == UnitKind.JOB.value).select("root_id", "job_dir").distinct()
    chk = ok.where(F.col("snapshot_type") == SnapshotType.CHECKPOINT.value).join(job_dirs, ["root_id", "job_dir"],
                                                                                 "left_semi")
    order = [F.col("checkpoint_id").desc(), F.col("snapshot_uri").desc()]
    w = Window.partitionBy("root_id", "job_dir").orderBy(*order)
    ranked = (chk.withColumn("rank", F.row_number().over(w) - 1)
              .where(F.col("rank") <= options.max_fallbacks)
              .withColumn("group_key", F.concat_ws("|", F.lit("job"), "root", "job_dir"))
              .withColumn("selected_by", F.when(F.col("rank") == 0, F.lit(DrSelectedBy.LATEST_RESTORABLE.value))
                          .otherwise(F.lit(DrSelectedBy.FALLBACK.value))))
    out = ranked.select(*CANDIDATE_COLUMNS)
    if options.savepoints is SavepointPolicy.NONE:
        return out
    sp = ok.where(F.col("snapshot_type") == SnapshotType.SAVEPOINT.value)
    if options.savepoints is SavepointPolicy.NEWEST:
        # A savepoint directory names its job only by a prefix; the index's job id (when the layout
        # gives one) groups them, else each savepoint root keeps its newest.
        owner = F.coalesce(F.col("job_id"), F.col("root"))
        w = Window.partitionBy(owner).orderBy(F.col("metadata_mtime").desc(), F.col("snapshot_uri").desc())
        sp = sp.withColumn("_n", F.row_number().over(w)).where(F.col("_n") == 1).drop("_n")
    return out.unionByName(_single(sp, DrSelectedBy.SAVEPOINT))


def _single(df: Any, selected_by: DrSelectedBy) -> Any:
    """Snapshots that are groups of their own: no fallback."""
    from pyspark.sql import functions as F

    return (df.withColumn("rank", F.lit(0)).withColumn("group_key", F.concat(F.lit("snapshot|"), "snapshot_uri"))
            .withColumn("selected_by", F.lit(selected_by.value)).select(*CANDIDATE_COLUMNS))
