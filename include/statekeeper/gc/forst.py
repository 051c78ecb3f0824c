"""Which ForSt databases can no longer be written: the only ones whose files GC judges.

A ForSt database in checkpoint storage (`statekeeper.layout.forst`) holds three kinds of files, and the
listing cannot tell them apart (docs/flink2.md, "ForSt databases"):

* files a checkpoint took over by reference (`giveUpOwnership`): the JobManager's shared-state registry
  owns them and deletes them once no retained checkpoint uses them; a `_metadata` names them;
* files restored into the database (after a failover, a CLAIM or LEGACY restore): they belong to the
  checkpoint they came from; a `_metadata` names them;
* the database's own files, written since its last checkpoint: no `_metadata` names them, and the live
  database reads, compacts and deletes them itself.

So an unreferenced file in a database is garbage only if that database can no longer be written. It
cannot when its job has written nothing under its job directory for the grace period (so no attempt of it
is running: a live database flushes and every checkpoint writes a `_metadata`) AND one of:

* `superseded`: a newer attempt of the same operator subtask has a database beside it (the task was
  restarted; the old attempt's database is never opened again: a restart opens `attempt_<n+1>`);
* `job_inactive`: the job is inactive by the GC's inactivity rule (`--inactive-after`: its newest
  checkpoint is older than that; a job directory without any checkpoint by its newest object), and the run
  declares its roots complete (`--roots-complete`). Without that declaration a job in a root the run was
  not given may have been restored in CLAIM mode from this job's newest checkpoint and read the newest
  attempt's database still: Flink deleted the claimed checkpoint, older ones remain, so nothing here says
  so (the split-root ForSt hand-over of tests/flink2/test_flink2_split_roots.py). Such a database is
  `held_back`: not judged, and its unreferenced files are named with the job's claimable tail.

Anything else is `live`: its unreferenced files are left alone and reported with their bytes. A database
of a job that wrote anything within the grace period is `live` whatever its attempt: a job resubmitted
under the same job id (HA, a resumed deployment) counts attempts from 0 again and reuses those
directories. Spark column logic over the pinned cut; nothing is collected but the per-job summary.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from statekeeper.layout.forst import DATABASE_PATTERN
from statekeeper.layout.spark_locate import job_of
from statekeeper.tables.vocabulary import DatabaseVerdict, FileKind, SnapshotType

DATABASE_COLUMNS = ("root_id", "job_dir", "database", "operator", "attempt")
# Verdicts of databases that can no longer be written: their unreferenced files are the sweep's.
DEAD = (DatabaseVerdict.SUPERSEDED.value, DatabaseVerdict.JOB_INACTIVE.value)


def database_files(files: Any, *, named_only: bool = True) -> Any:
    """`files` rows of ForSt databases, with DATABASE_COLUMNS' database, operator and attempt. A path of
    kind `forst_working` the pattern does not take apart names no database ("" and null attempt): left out,
    unless `named_only` is false (the per-job report counts it as left alone)."""
    from pyspark.sql import functions as F

    path = F.col("relative_path")
    rows = (files.where(F.col("kind") == FileKind.FORST_WORKING.value)
            .withColumn("database", F.regexp_extract(path, DATABASE_PATTERN, 1))
            .withColumn("operator", F.regexp_extract(path, DATABASE_PATTERN, 2))
            .withColumn("attempt", F.regexp_extract(path, DATABASE_PATTERN, 3).try_cast("long")))
    return rows.where(F.col("database") != "") if named_only else rows


def job_last_checkpoint(files: Any, snapshots: Any) -> Any:
    """(root_id, job, last_written): the newest checkpoint `_metadata` of each job directory (`job_of`), else
    its newest object (a directory left with data files and no checkpoint)."""
    from pyspark.sql import functions as F

    job = ["root_id", job_of("job_dir").alias("job")]
    newest_checkpoint = (snapshots.where(F.col("snapshot_type") == SnapshotType.CHECKPOINT.value)
                         .groupBy(*job).agg(F.max("metadata_mtime").alias("checkpoint")))
    newest_object = files.groupBy(*job).agg(F.max("mtime").alias("object"))
    return (newest_object.join(newest_checkpoint, ["root_id", "job"], "left")
            .select("root_id", "job", F.coalesce("checkpoint", "object").alias("last_written")))


def database_verdicts(files: Any, snapshots: Any, active: Any, inactive_cutoff: datetime | None,
                      roots_complete: bool = False) -> Any:
    """(DATABASE_COLUMNS, verdict) of every ForSt database under the roots (DatabaseVerdict).

    `active`: (root_id, job) of the job directories holding an object younger than the grace period
    (`statekeeper.gc.plan.active_jobs`); `inactive_cutoff`: now - `--inactive-after`, or None; `job_inactive`
    only with `roots_complete` (the run declared its roots every root any job may restore from). A database's
    job is its job directory's (`job_of`): in a root that is a job's own directory, the activity and the
    checkpoints of the whole root, not of its shared/ alone."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dbs = database_files(files).select(*DATABASE_COLUMNS).distinct().withColumn("job", job_of("job_dir"))
    subtask = Window.partitionBy("root_id", "job", "operator")
    dbs = dbs.withColumn("newest_attempt", F.max("attempt").over(subtask))
    quiet = active.select("root_id", "job").withColumn("active", F.lit(True))
    dbs = dbs.join(quiet, ["root_id", "job"], "left")
    is_quiet = ~F.coalesce(F.col("active"), F.lit(False))
    inactive = F.lit(False)
    if inactive_cutoff is not None:
        dbs = dbs.join(job_last_checkpoint(files, snapshots), ["root_id", "job"], "left")
        inactive = F.coalesce(F.col("last_written") < F.lit(inactive_cutoff), F.lit(False))
    verdict = (F.when(is_quiet & (F.col("attempt") < F.col("newest_attempt")),
                      F.lit(DatabaseVerdict.SUPERSEDED.value))
               .when(is_quiet & inactive, F.lit((DatabaseVerdict.JOB_INACTIVE if roots_complete
                                                 else DatabaseVerdict.HELD_BACK).value))
               .otherwise(F.lit(DatabaseVerdict.LIVE.value)))
    return dbs.select(*DATABASE_COLUMNS, verdict.alias("verdict"))


def dead_database_files(files: Any, verdicts: Any) -> Any:
    """(uri) of every file of a database that can no longer be written (verdict in DEAD)."""
    from pyspark.sql import functions as F

    dead = verdicts.where(F.col("verdict").isin(*DEAD)).select(*DATABASE_COLUMNS)
    return database_files(files).join(dead, list(DATABASE_COLUMNS), "left_semi").select("uri")


def held_back_files(files: Any, live: Any, verdicts: Any) -> Any:
    """(root, root_id, job, size, verdict) of every unreferenced file of a `held_back` database: what an inactive
    job's newest databases would give up if the roots were declared complete (named with the claimable tails).
    `live`: (file_uri) of every file that stays referenced."""
    from pyspark.sql import functions as F

    held = verdicts.where(F.col("verdict") == DatabaseVerdict.HELD_BACK.value).select(*DATABASE_COLUMNS)
    return (database_files(files).join(held, list(DATABASE_COLUMNS), "left_semi")
            .join(live.select(F.col("file_uri").alias("uri")), "uri", "left_anti")
            .select("root", "root_id", job_of("job_dir").alias("job"), "size",
                    F.lit(DatabaseVerdict.HELD_BACK.value).alias("verdict")))


def per_job(files: Any, live: Any, verdicts: Any, planned: Any) -> Any:
    """One row per job directory (`job_of`) with a ForSt database: its databases (all, dead), their bytes, the
    unreferenced files and bytes of dead databases the plan reclaims, and of the others, left alone.

    `live`: (file_uri) of every file that stays referenced; `planned`: the sweep's rows (uri, before the
    ownerless rule: a held-back directory's dead files still count as dead)."""
    from pyspark.sql import functions as F

    rows = (database_files(files, named_only=False).join(verdicts, list(DATABASE_COLUMNS), "left")
            .join(live.select(F.col("file_uri").alias("uri")).withColumn("referenced", F.lit(True)), "uri", "left")
            .join(planned.select("uri").withColumn("reclaimed", F.lit(True)), "uri", "left"))
    referenced = F.coalesce(F.col("referenced"), F.lit(False))
    reclaimed = F.coalesce(F.col("reclaimed"), F.lit(False))
    dead = F.coalesce(F.col("verdict"), F.lit(DatabaseVerdict.LIVE.value)).isin(*DEAD)
    unjudged = ~referenced & ~reclaimed

    def count_if(cond: Any) -> Any:
        return F.sum(F.when(cond, 1).otherwise(0))

    def bytes_if(cond: Any) -> Any:
        return F.sum(F.when(cond, F.col("size")).otherwise(0))

    return (rows.groupBy("root", "root_id", job_of("job_dir").alias("job_dir"))
            .agg(F.countDistinct(F.when(F.col("database") != "", F.col("database"))).alias("databases"),
                 F.countDistinct(F.when(dead, F.col("database"))).alias("dead_databases"),
                 F.sum("size").alias("bytes"),
                 count_if(reclaimed).alias("dead_files"), bytes_if(reclaimed).alias("dead_bytes"),
                 count_if(unjudged).alias("unjudged_files"), bytes_if(unjudged).alias("unjudged_bytes")))
