"""The sweep: which listed objects nothing that remains references, as Spark joins over the pinned cut.

Reachable is decided from `references` only, never from where a file sits: every file any remaining
snapshot names (any job, any root, savepoints included) is live, and for a job that looks active
also every file any index run inside the grace window saw referenced (an in-flight checkpoint may
build on a checkpoint Flink already subsumed). A candidate is a listed regular object that
nothing reachable names, older than the grace period, of a Flink layout kind GC knows how to judge:

| kind | candidate when |
|---|---|
| `checkpoint_metadata`, `savepoint_metadata` | only its snapshot is expired by the policy (deleted first) |
| `exclusive`, `inprogress_metadata` (in `chk-N/`) | unreferenced and older than the grace |
| `shared` (directly in `shared/`) | unreferenced and older than the grace |
| `task_owned`, `file_merging_managed`, `savepoint_data` | as above, and never in a job that looks active |
| `forst_working`, `unknown`, non-regular objects | never (a live ForSt DB; not Flink's layout; symlinks) |

A job directory "looks active" when any object in it is younger than the grace period.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statekeeper.tables.catalog import GC_ACTIONS
from statekeeper.tables.vocabulary import FileKind, GcOutcome, GcReason

# Kinds a sweep may delete anywhere once unreferenced and old enough.
SWEPT_KINDS = (FileKind.EXCLUSIVE, FileKind.INPROGRESS_METADATA, FileKind.SHARED)
# Kinds a sweep may delete only in a job directory that does not look active.
SWEPT_WHEN_INACTIVE = (FileKind.TASK_OWNED, FileKind.FILE_MERGING_MANAGED, FileKind.SAVEPOINT_DATA)
METADATA_KINDS = (FileKind.CHECKPOINT_METADATA, FileKind.SAVEPOINT_METADATA)
# Never judged: a running ForSt DB's files, objects outside Flink's layout, non-regular objects.
NEVER_KINDS = (FileKind.FORST_WORKING, FileKind.UNKNOWN)


@dataclass(frozen=True)
class SweepInputs:
    files: Any          # `files` at the pinned cut
    snapshots: Any      # `snapshots` at the pinned cut
    references: Any     # `references` at the pinned cut
    history: Any | None = None   # DataFrame(root_id, job_dir, file_uri): references of earlier index runs
                                 # inside the grace window (same columns as `references`' subset)


def _values(kinds: tuple[FileKind, ...]) -> list[str]:
    return [k.value for k in kinds]


def active_jobs(files: Any, grace_cutoff: datetime) -> Any:
    """(root_id, job_dir) of every job directory holding an object younger than the grace period."""
    from pyspark.sql import functions as F

    return (files.groupBy("root_id", "job_dir").agg(F.max("mtime").alias("newest"))
            .where(F.col("newest") >= F.lit(grace_cutoff)).select("root_id", "job_dir"))


def reachable_files(inputs: SweepInputs, expired: Any, active: Any) -> Any:
    """Distinct `file_uri` of everything that stays referenced."""
    from pyspark.sql import functions as F

    remaining = inputs.references.join(expired.select(F.col("uri").alias("snapshot_uri")), "snapshot_uri",
                                       "left_anti")
    live = remaining.select("file_uri")
    if inputs.history is not None:
        # Only active jobs need the window's history (a stopped job starts no new checkpoint).
        live = live.unionByName(inputs.history.join(active, ["root_id", "job_dir"], "left_semi").select("file_uri"))
    return live.distinct()


def candidates(inputs: SweepInputs, expired: Any, *, run_id: str, grace_cutoff: datetime) -> Any:
    """The plan: one row per object to delete, shaped like `gc_actions` (outcome `planned`)."""
    from pyspark.sql import functions as F

    files = inputs.files
    active = active_jobs(files, grace_cutoff).withColumn("active", F.lit(True))
    live = reachable_files(inputs, expired, active.drop("active"))
    expired_meta = expired.select(F.col("uri"), F.col("rule"))
    # Files an expired snapshot referenced: labelled expired_snapshot when nothing else keeps them.
    expired_uses = (inputs.references.join(expired.select(F.col("uri").alias("snapshot_uri")), "snapshot_uri",
                                           "left_semi")
                    .groupBy(F.col("file_uri").alias("uri")).agg(F.min("snapshot_uri").alias("expired_by")))
    with_metadata = (files.where(F.col("kind") == FileKind.CHECKPOINT_METADATA.value)
                     .select("root_id", "job_dir", "checkpoint_id").distinct()
                     .withColumn("has_metadata", F.lit(True)))

    pool = (files.join(live.withColumnRenamed("file_uri", "uri"), "uri", "left_anti")
            .join(active, ["root_id", "job_dir"], "left")
            .join(expired_meta, "uri", "left")
            .join(expired_uses, "uri", "left")
            .join(with_metadata, ["root_id", "job_dir", "checkpoint_id"], "left"))
    is_active = F.coalesce(F.col("active"), F.lit(False))
    kind = F.col("kind")
    old = F.col("mtime") < F.lit(grace_cutoff)
    expired_metadata = kind.isin(_values(METADATA_KINDS)) & F.col("rule").isNotNull()
    swept = (old & (kind.isin(_values(SWEPT_KINDS))
                    | (kind.isin(_values(SWEPT_WHEN_INACTIVE)) & ~is_active)))
    plan = pool.where(expired_metadata | swept)

    reason = (F.when(expired_metadata | F.col("expired_by").isNotNull(), F.lit(GcReason.EXPIRED_SNAPSHOT.value))
              .when(kind == FileKind.INPROGRESS_METADATA.value, F.lit(GcReason.INPROGRESS.value))
              .when((kind == FileKind.EXCLUSIVE.value) & F.col("checkpoint_id").isNotNull()
                    & F.col("has_metadata").isNull(), F.lit(GcReason.FAILED_CHECKPOINT.value))
              .otherwise(F.lit(GcReason.ORPHAN.value)))
    snapshot_uri = F.when(expired_metadata, F.col("uri")).otherwise(F.col("expired_by"))
    return (plan.select(
        F.lit(run_id).alias("run_id"), "uri", "root", "root_id", "job_dir", "bucket", "relative_path", "kind",
        "size", "mtime", "etag", reason.alias("reason"), snapshot_uri.alias("snapshot_uri"),
        F.when(expired_metadata, F.lit(0)).otherwise(F.lit(1)).cast("int").alias("delete_order"),
        F.lit(GcOutcome.PLANNED.value).alias("outcome"),
        F.when(expired_metadata, F.col("rule")).otherwise(F.lit(None).cast("string")).alias("message"),
        F.lit(None).cast("timestamp").alias("attempted_at"))
        .select(*GC_ACTIONS.schema.names))


def not_judged(files: Any) -> Any:
    """Objects GC never judges (ForSt working files, unknown layout, non-regular objects): counted in
    the run's summary so nothing under a root is skipped silently."""
    from pyspark.sql import functions as F

    judged = _values(SWEPT_KINDS + SWEPT_WHEN_INACTIVE + METADATA_KINDS)
    return files.where(~F.col("kind").isin(judged))
