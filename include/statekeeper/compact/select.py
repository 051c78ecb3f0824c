"""Which snapshots a compaction run takes, and the inline-state report: Spark column logic over the
pinned index tables (nothing collected but the report's top rows)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from statekeeper.compact.options import CompactOptions
from statekeeper.compact.plan import Placement
from statekeeper.jobs import selection
from statekeeper.layout.spark_locate import job_location_of, job_of
from statekeeper.tables.vocabulary import (CompactionStatus, HandleKind, LayoutKind, SnapshotStatus, SnapshotType,
                                           Slot)
from statekeeper.units import MiB

# What may leave `_metadata` (spec §7, §11.11): tag-1 handles outside coordinator and master state.
_STAYS = (Slot.COORDINATOR.value, Slot.MASTER.value)
_DONE = (CompactionStatus.COMPACTED.value, CompactionStatus.ALREADY_COMPACTED.value,
         CompactionStatus.RECOVERED.value)


def _can_move() -> Any:
    """Whether an `inline_state` row's bytes are ones a compaction can move out."""
    from pyspark.sql import functions as F

    return (F.col("handle_kind") == HandleKind.BYTE_STREAM_STATE_HANDLE.value) & ~F.col("slot").isin(*_STAYS)


def movable(inline: Any) -> Any:
    """The `inline_state` rows whose bytes a compaction can move out."""
    return inline.where(_can_move())


def candidates(opts: CompactOptions, snaps: Any, inline: Any, files: Any, results: Any, done: Any | None,
               now: datetime) -> Any:
    """Snapshots to compact: uri, metadata_size, metadata_etag, root, job_dir, job_id, checkpoint_id,
    snapshot_type, movable_bytes, refused (why --in-place must not touch it; null when it may) and
    job_newest_checkpoint (in place: the newest chk-N the index saw in the job directory)."""
    from pyspark.sql import functions as F

    move = (movable(inline).groupBy("snapshot_uri").agg(F.sum("inline_bytes").alias("movable_bytes"))
            .withColumnRenamed("snapshot_uri", "uri"))
    broken = (selection.verdicts(results).where(~F.col("restorable"))
              .select(F.col("snapshot_uri").alias("uri")).distinct())
    base = (snaps.where(F.col("status") == SnapshotStatus.OK.value)
            .join(broken, "uri", "left_anti")
            .join(move, "uri", "left")
            .withColumn("movable_bytes", F.coalesce("movable_bytes", F.lit(0)).cast("long")))
    if opts.snapshots:
        chosen = base.where(F.col("uri").isin(*opts.snapshots))
    else:
        big = F.col("metadata_size") > F.lit(opts.max_metadata_size)
        if opts.max_inline_ratio is not None:
            big = big | ((F.col("metadata_size") >= F.lit(MiB))
                         & (F.coalesce("inline_bytes", F.lit(0)) >= F.col("metadata_size") * opts.max_inline_ratio))
        chosen = base.where(big & (F.col("movable_bytes") > 0))
        if opts.job_filter:
            chosen = chosen.where(selection.job_dir_matches(opts.job_filter))
        if done is not None:
            finished = (done.where(F.col("status").isin(*_DONE))
                        .select(F.col("source_metadata_uri").alias("uri"), F.col("source_etag").alias("metadata_etag")))
            chosen = chosen.join(finished, ["uri", "metadata_etag"], "left_anti")
    refused = F.lit(None).cast("string")
    newest_checkpoint = F.lit(None).cast("long")
    if opts.placement is Placement.IN_PLACE:
        # per job, not per unit of the index: in a root that is the job's own directory, chk-N/ and shared/
        # are units of one job, and the job runs when any of them was written
        job = job_of("job_dir").alias("job")
        newest = files.groupBy("root", job).agg(F.max("mtime").alias("job_newest_mtime"))
        newest_chk = snaps.groupBy("root", job).agg(F.max("dir_checkpoint_id").alias("_newest_chk"))
        chosen = (chosen.withColumn("job", job_of("job_dir"))
                  .join(newest, ["root", "job"], "left").join(newest_chk, ["root", "job"], "left"))
        newest_checkpoint = F.col("_newest_chk")
        is_checkpoint = ((F.col("layout_kind") == LayoutKind.CHECKPOINT_METADATA.value)
                         & (F.coalesce("snapshot_type", F.lit("")) != SnapshotType.SAVEPOINT.value))
        active = F.col("job_newest_mtime") > F.lit(now - opts.quiet_period)
        refused = F.when(is_checkpoint & active, F.format_string(
            "--in-place refused: job directory %s wrote an object at %s, within --quiet-period; the job may be "
            "running and its JobManager owns this checkpoint. Stop the job (or wait), re-index, then re-run; or "
            "compact into a new directory (the default)", job_location_of(),
            F.date_format("job_newest_mtime", "yyyy-MM-dd'T'HH:mm:ssX")))
    return chosen.select("uri", "metadata_size", "metadata_etag", "root", "job_dir", "job_id", "checkpoint_id",
                         "snapshot_type", "layout_kind", "movable_bytes", refused.alias("refused"),
                         newest_checkpoint.alias("job_newest_checkpoint"))


def report(snaps: Any, inline: Any, rows: int) -> list[dict[str, Any]]:
    """Per job and operator over every indexed snapshot: inline bytes, what compaction could move, handles.
    The `rows` largest, on the driver."""
    from pyspark.sql import functions as F

    ok = snaps.where(F.col("status") == SnapshotStatus.OK.value).select(F.col("uri").alias("snapshot_uri"))
    can_move = _can_move()
    agg = (inline.join(ok, "snapshot_uri", "left_semi")
           .groupBy("job_dir", "operator_id")
           .agg(F.max("operator_name").alias("operator_name"), F.max("operator_uid").alias("operator_uid"),
                F.countDistinct("snapshot_uri").alias("snapshots"),
                F.sum("inline_bytes").cast("long").alias("inline_bytes"),
                F.sum(F.when(can_move, F.col("inline_bytes")).otherwise(0)).cast("long").alias("movable_bytes"),
                F.sum("handle_count").cast("long").alias("handle_count"))
           .orderBy(F.col("inline_bytes").desc(), "job_dir", "operator_id").limit(rows))
    return [r.asDict() for r in agg.collect()]
