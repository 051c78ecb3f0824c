"""The report's idle job directories (statekeeper.jobs.idle), aggregated in Spark.

Per job directory the newest checkpoint `_metadata` and the newest object and bytes; the directories
found idle are cut to the largest `limit` in Spark, then their users (`Gatherer.cross_uses`: distinct files
per pair of directories) are grouped per pair. Only those rows reach the driver, where `judge` applies
the rule.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from statekeeper.jobs.idle import IdleJobDir, JobActivity, Use, judge
from statekeeper.layout.classify import JOB_ID_PATTERN
from statekeeper.tables.vocabulary import SnapshotType


def idle_job_dirs(g: Any, cutoff: datetime, limit: int) -> tuple[tuple[IdleJobDir, ...], int, int]:
    """The `limit` largest idle job directories (with their users), and how many there are and their bytes."""
    from pyspark.sql import functions as F

    newest_checkpoint = (g.frames["snapshots"].where(F.col("snapshot_type") == SnapshotType.CHECKPOINT.value)
                         .groupBy("root", "job_dir").agg(F.max("metadata_mtime").alias("newest_checkpoint")))
    per_dir = (g.frames["files"].groupBy("root", "job_dir")
               .agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes"), F.max("mtime").alias("newest_object"))
               .join(newest_checkpoint, ["root", "job_dir"], "left")
               .where(F.col("job_dir").rlike(JOB_ID_PATTERN)))
    last = F.coalesce("newest_checkpoint", "newest_object")
    idle = g._keep(per_dir.where(last < F.lit(cutoff)))
    totals = idle.agg(F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b")).first()
    top = idle.orderBy(F.desc("bytes"), "root", "job_dir").limit(limit)
    shown = [JobActivity(r["root"], r["job_dir"], r["newest_checkpoint"], r["newest_object"], int(r["files"]),
                         int(r["bytes"] or 0)) for r in top.collect()]
    if not shown:
        return (), int(totals["n"] or 0), int(totals["b"] or 0)
    uses_rows = (g.cross_uses()
                 .join(top.select(F.col("root").alias("target_root"), F.col("job_dir").alias("target_job_dir")),
                       ["target_root", "target_job_dir"], "left_semi")
                 .groupBy("root", "job_dir", "target_root", "target_job_dir")
                 .agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes")))
    # Pinners' own activity decides whether they are live: every directory that uses a shown one.
    users = uses_rows.select("root", "job_dir").distinct()
    user_activity = [JobActivity(r["root"], r["job_dir"], r["newest_checkpoint"], r["newest_object"], 0, 0)
                     for r in per_dir.join(users, ["root", "job_dir"], "left_semi").collect()]
    snapshot_counts = _snapshot_counts(g, uses_rows)
    uses = [Use(r["root"], r["job_dir"], r["target_root"], r["target_job_dir"],
                snapshot_counts.get((r["root"], r["job_dir"], r["target_root"], r["target_job_dir"]), 0),
                int(r["files"]), int(r["bytes"] or 0)) for r in uses_rows.collect()]
    seen = {(a.root, a.job_dir) for a in shown}
    activity = shown + [a for a in user_activity if (a.root, a.job_dir) not in seen]
    return tuple(judge(activity, uses, cutoff)), int(totals["n"] or 0), int(totals["b"] or 0)


def _snapshot_counts(g: Any, uses_rows: Any) -> dict[tuple[str, str, str, str], int]:
    """How many retained snapshots of each user directory reference the target's files."""
    from pyspark.sql import functions as F

    pairs = uses_rows.select("root", "job_dir", "target_root", "target_job_dir")
    refs = g.frames["references"]
    rows = (refs.select("root", "job_dir", F.col("file_root").alias("target_root"),
                        F.col("file_job_dir").alias("target_job_dir"), "snapshot_uri")
            .join(pairs, ["root", "job_dir", "target_root", "target_job_dir"], "left_semi")
            .groupBy("root", "job_dir", "target_root", "target_job_dir")
            .agg(F.countDistinct("snapshot_uri").alias("n")).collect())
    return {(r["root"], r["job_dir"], r["target_root"], r["target_job_dir"]): int(r["n"]) for r in rows}
