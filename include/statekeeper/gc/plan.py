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
| `task_owned`, `file_merging_managed`, `savepoint_data`, `changelog` | as above, and never in a job that looks active |
| `forst_working` | as above, and only in a database that can no longer be written (`statekeeper.gc.forst`) |
| `unknown`, non-regular objects | never (not Flink's layout; symlinks) |

A job directory "looks active" when any object in it is younger than the grace period.

Every rule about a job groups by the job's directory (`spark_locate.job_of`: "." for the chk-N/, shared/
and taskowned/ of a root that is itself a job's directory), never by the index's unit name: by that name
each chk-N of such a root was a job of its own, shared/ a job without a snapshot, and taskowned/ a job
judged by its own newest file, so a running job's task-owned files and the grace window's history went.

**Ownerless job directories.** A job restored in CLAIM or LEGACY mode from another job's checkpoint
keeps using the old job's `shared/` files, and in CLAIM mode Flink deletes the restored `chk-N/`
once the new job subsumes it: the old job's directory is left with data files and no `_metadata`.
When the new job lives in a root this run was not given, nothing the run can see references those
files, yet they are live. So a job directory that holds a *data file* (kind `exclusive`, `shared`,
`task_owned`, `file_merging_managed`, `savepoint_data`, `changelog` or `forst_working`: a dead ForSt
database's files are what a CLAIM or LEGACY restore links into the new job's database) and no *retained
snapshot* (no row of
`snapshots` at the pinned cut with its (root_id, job_dir), whatever its status or whether the policy
expires it; a savepoint directory is its own job directory) is *ownerless*, and none of its files is
planned unless the run is told its roots are every root any job may restore from
(`OwnerlessRule.roots_complete`) or the directory's newest object is older than
`OwnerlessRule.older_than_cutoff`. Each such directory is reported with what it holds back. A
directory with a snapshot is judged as before: a job's own expired snapshots do not make it ownerless.

**Claimable tails.** The ownerless rule cannot see the same hand-over when the old job still retains *older*
checkpoints (`num-retained` above 1): its directory has snapshots, but the files only the claimed (and since
deleted) newest checkpoint used are referenced from the other root alone. What marks them: they were written
after the old job's newest retained `_metadata`. So a job's *tail* (its unreferenced files of a kind a
claimed checkpoint may use, `CLAIMABLE_KINDS`, newer than its newest retained checkpoint's `_metadata`) is
held back like an ownerless directory unless the run declares its roots complete, or a failed checkpoint
explains it: the job has a `chk-N/` without `_metadata` whose id is the next after its newest retained
checkpoint, so no checkpoint completed (and could be claimed) between them. ForSt databases go by the same
rule, and in addition the newest attempt's database of a job is judged dead by inactivity
(`--inactive-after`) only when the roots are declared complete (`statekeeper.gc.forst`).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statekeeper.layout.spark_locate import job_of
from statekeeper.tables.catalog import GC_ACTIONS
from statekeeper.tables.vocabulary import FileKind, GcOutcome, GcReason, OwnerlessVerdict, SnapshotType

# Kinds a sweep may delete anywhere once unreferenced and old enough.
SWEPT_KINDS = (FileKind.EXCLUSIVE, FileKind.INPROGRESS_METADATA, FileKind.SHARED)
# Kinds a sweep may delete only in a job directory that does not look active. DSTL files among them: a
# running job's changelog writer may put into its next checkpoint an upload made for one that failed, so
# an unreferenced DSTL file of a live job is not proof of garbage.
SWEPT_WHEN_INACTIVE = (FileKind.TASK_OWNED, FileKind.FILE_MERGING_MANAGED, FileKind.SAVEPOINT_DATA,
                       FileKind.CHANGELOG)
# Swept only in a ForSt database that can no longer be written (`dead_databases` of sweep_all).
SWEPT_WHEN_DEAD = (FileKind.FORST_WORKING,)
METADATA_KINDS = (FileKind.CHECKPOINT_METADATA, FileKind.SAVEPOINT_METADATA)
# Never judged: objects outside Flink's layout, non-regular objects.
NEVER_KINDS = (FileKind.UNKNOWN,)
# What a snapshot references: a directory holding one of these and no snapshot is ownerless. Not
# `_metadata` kinds (their presence is a snapshot), not in-progress `_metadata` (a crash leftover no
# job restores from), not unknown objects (never judged anyway).
DATA_KINDS = (FileKind.EXCLUSIVE, FileKind.SHARED, FileKind.TASK_OWNED, FileKind.FILE_MERGING_MANAGED,
              FileKind.SAVEPOINT_DATA, FileKind.CHANGELOG, FileKind.FORST_WORKING)
# What a checkpoint claimed by a job in another root may keep using after the old job lost that checkpoint's
# `_metadata` (CLAIM: Flink deletes the restored chk-N/ once the new job subsumes it). Not `exclusive` or
# in-progress `_metadata` (they went with the claimed chk-N/), not savepoint data (a savepoint directory that
# lost its `_metadata` has no snapshot at all: ownerless).
CLAIMABLE_KINDS = (FileKind.SHARED, FileKind.TASK_OWNED, FileKind.FILE_MERGING_MANAGED, FileKind.CHANGELOG,
                   FileKind.FORST_WORKING)


@dataclass(frozen=True)
class SweepInputs:
    files: Any          # `files` at the pinned cut
    snapshots: Any      # `snapshots` at the pinned cut
    references: Any     # `references` at the pinned cut
    history: Any | None = None   # DataFrame(root_id, job_dir, file_uri): references of earlier index runs
                                 # inside the grace window (same columns as `references`' subset)


@dataclass(frozen=True)
class OwnerlessRule:
    """When the files of an ownerless job directory may be planned at all (default: never)."""

    roots_complete: bool = False                 # the run's roots are every root any job may restore from
    older_than_cutoff: datetime | None = None    # or: the directory's newest object is older than this


# A job: its root and its directory (job_of), the key of every job-level rule.
JOB_KEY = ("root_id", "job")


def with_job(df: Any) -> Any:
    """`df` (with root_id, job_dir) plus `job`, the job directory its unit belongs to."""
    return df.withColumn("job", job_of("job_dir"))


def _values(kinds: tuple[FileKind, ...]) -> list[str]:
    return [k.value for k in kinds]


def active_jobs(files: Any, grace_cutoff: datetime) -> Any:
    """JOB_KEY of every job directory holding an object younger than the grace period."""
    from pyspark.sql import functions as F

    return (with_job(files).groupBy(*JOB_KEY).agg(F.max("mtime").alias("newest"))
            .where(F.col("newest") >= F.lit(grace_cutoff)).select(*JOB_KEY))


def reachable_files(inputs: SweepInputs, expired: Any, active: Any) -> Any:
    """Distinct `file_uri` of everything that stays referenced."""
    from pyspark.sql import functions as F

    remaining = inputs.references.join(expired.select(F.col("uri").alias("snapshot_uri")), "snapshot_uri",
                                       "left_anti")
    live = remaining.select("file_uri")
    if inputs.history is not None:
        # Only active jobs need the window's history (a stopped job starts no new checkpoint).
        live = live.unionByName(with_job(inputs.history).join(active, list(JOB_KEY), "left_semi").select("file_uri"))
    return live.distinct()


def ownerless_dirs(files: Any, snapshots: Any, rule: OwnerlessRule) -> Any:
    """(JOB_KEY, verdict) of every ownerless job directory: a data file and no snapshot row.
    `verdict` (OwnerlessVerdict) says whether the rule lets its files be planned."""
    from pyspark.sql import functions as F

    dirs = (with_job(files).groupBy(*JOB_KEY)
            .agg(F.max(F.col("kind").isin(_values(DATA_KINDS))).alias("has_data"), F.max("mtime").alias("newest"))
            .where(F.col("has_data"))
            .join(with_job(snapshots).select(*JOB_KEY).distinct(), list(JOB_KEY), "left_anti"))
    verdict = F.lit(OwnerlessVerdict.HELD_BACK.value)
    if rule.older_than_cutoff is not None:
        verdict = F.when(F.col("newest") < F.lit(rule.older_than_cutoff),
                         F.lit(OwnerlessVerdict.OLDER_THAN.value)).otherwise(verdict)
    if rule.roots_complete:
        verdict = F.lit(OwnerlessVerdict.ROOTS_COMPLETE.value)
    return dirs.select(*JOB_KEY, verdict.alias("verdict"))


def claimable_tails(files: Any, snapshots: Any, roots_complete: bool) -> Any:
    """(JOB_KEY, newest_checkpoint, verdict) of every job whose tail a claimed checkpoint may use: a job with a
    checkpoint at the cut and no failed checkpoint right after its newest (see the module's "Claimable tails").
    `newest_checkpoint` is that checkpoint's `_metadata` mtime; `verdict` (OwnerlessVerdict) says whether the
    tail's files may be planned (`roots_complete`) or are held back. One row per job: small enough to broadcast."""
    from pyspark.sql import functions as F

    newest = (with_job(snapshots).where(F.col("snapshot_type") == SnapshotType.CHECKPOINT.value)
              .groupBy(*JOB_KEY).agg(F.max("metadata_mtime").alias("newest_checkpoint"),
                                     F.max("checkpoint_id").alias("newest_id")))
    # A chk-N/ holding files and no `_metadata`: a checkpoint that failed (or a crash cut short).
    failed = (with_job(files).where(F.col("checkpoint_id").isNotNull())
              .groupBy(*JOB_KEY, "checkpoint_id")
              .agg(F.max(F.col("kind") == FileKind.CHECKPOINT_METADATA.value).alias("has_metadata"))
              .where(~F.col("has_metadata")).select(*JOB_KEY, F.col("checkpoint_id").alias("failed_id")))
    explained = (newest.join(failed, list(JOB_KEY)).where(F.col("failed_id") == F.col("newest_id") + 1)
                 .select(*JOB_KEY).distinct())
    verdict = OwnerlessVerdict.ROOTS_COMPLETE if roots_complete else OwnerlessVerdict.HELD_BACK
    return (newest.join(explained, list(JOB_KEY), "left_anti")
            .select(*JOB_KEY, "newest_checkpoint", F.lit(verdict.value).alias("verdict")))


def in_tail() -> Any:
    """Whether a row (with `kind`, `mtime`, and `newest_checkpoint` from `claimable_tails`) is a tail file."""
    from pyspark.sql import functions as F

    return (F.col("kind").isin(_values(CLAIMABLE_KINDS)) & F.col("newest_checkpoint").isNotNull()
            & (F.col("mtime") > F.col("newest_checkpoint")))


def tail_rows(swept: Any, tails: Any) -> Any:
    """The rows of `swept` in a claimable tail, with their `job` and the tail's `verdict`."""
    from pyspark.sql import functions as F

    return with_job(swept).join(F.broadcast(tails), list(JOB_KEY), "inner").where(in_tail())


def held_back(swept: Any, ownerless: Any) -> Any:
    """The rows of `swept` (`sweep_all`) in ownerless directories, with the directory's `job` and `verdict`."""
    from pyspark.sql import functions as F

    return with_job(swept).join(F.broadcast(ownerless), list(JOB_KEY), "inner")


def withhold(swept: Any, ownerless: Any, tails: Any | None = None) -> Any:
    """`swept` without the files of every ownerless directory and every claimable tail the rules hold back."""
    from pyspark.sql import functions as F

    held = ownerless.where(F.col("verdict") == OwnerlessVerdict.HELD_BACK.value).select(*JOB_KEY)
    # Broadcast: a row per job directory. Shuffled, every planned file went by its job directory into one task
    # per directory before the write (at 1M objects 826k rows, most of them in one task).
    out = with_job(swept).join(F.broadcast(held), list(JOB_KEY), "left_anti")
    if tails is not None:
        held_tails = (tails.where(F.col("verdict") == OwnerlessVerdict.HELD_BACK.value)
                      .select(*JOB_KEY, "newest_checkpoint"))
        out = (out.join(F.broadcast(held_tails), list(JOB_KEY), "left")
               .where(~F.coalesce(in_tail(), F.lit(False))))
    return out.select(*GC_ACTIONS.schema.names)


def sweep_all(inputs: SweepInputs, expired: Any, *, run_id: str, grace_cutoff: datetime,
              live: Any | None = None, dead_databases: Any | None = None) -> Any:
    """Every object nothing reachable under the run's roots names and old enough, shaped like
    `gc_actions`: the plan before the ownerless rule. `live`: `reachable_files` when the caller has it;
    `dead_databases`: (uri) of the files of ForSt databases that can no longer be written
    (`statekeeper.gc.forst.dead_database_files`); without it no ForSt file is planned."""
    from pyspark.sql import functions as F

    files = inputs.files
    active = active_jobs(files, grace_cutoff).withColumn("active", F.lit(True))
    if live is None:
        live = reachable_files(inputs, expired, active.drop("active"))
    if dead_databases is None:
        dead_databases = files.sparkSession.createDataFrame([], "uri string")
    expired_meta = expired.select(F.col("uri"), F.col("rule"))
    # Files an expired snapshot referenced: labelled expired_snapshot when nothing else keeps them.
    expired_uses = (inputs.references.join(expired.select(F.col("uri").alias("snapshot_uri")), "snapshot_uri",
                                           "left_semi")
                    .groupBy(F.col("file_uri").alias("uri")).agg(F.min("snapshot_uri").alias("expired_by")))
    with_metadata = (files.where(F.col("kind") == FileKind.CHECKPOINT_METADATA.value)
                     .select("root_id", "job_dir", "checkpoint_id").distinct()
                     .withColumn("has_metadata", F.lit(True)))

    pool = (with_job(files).join(live.withColumnRenamed("file_uri", "uri"), "uri", "left_anti")
            .join(active, list(JOB_KEY), "left")
            .join(expired_meta, "uri", "left")
            .join(expired_uses, "uri", "left")
            .join(with_metadata, ["root_id", "job_dir", "checkpoint_id"], "left")
            .join(dead_databases.select("uri").distinct().withColumn("dead_database", F.lit(True)), "uri", "left"))
    is_active = F.coalesce(F.col("active"), F.lit(False))
    in_dead_database = F.coalesce(F.col("dead_database"), F.lit(False))
    kind = F.col("kind")
    old = F.col("mtime") < F.lit(grace_cutoff)
    expired_metadata = kind.isin(_values(METADATA_KINDS)) & F.col("rule").isNotNull()
    swept = (old & (kind.isin(_values(SWEPT_KINDS))
                    | (kind.isin(_values(SWEPT_WHEN_INACTIVE)) & ~is_active)
                    | (kind.isin(_values(SWEPT_WHEN_DEAD)) & in_dead_database & ~is_active)))
    plan = pool.where(expired_metadata | swept)

    reason = (F.when(expired_metadata | F.col("expired_by").isNotNull(), F.lit(GcReason.EXPIRED_SNAPSHOT.value))
              .when(kind == FileKind.INPROGRESS_METADATA.value, F.lit(GcReason.INPROGRESS.value))
              .when(kind == FileKind.FORST_WORKING.value, F.lit(GcReason.DEAD_DATABASE.value))
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
    """Objects GC never judges (unknown layout, non-regular objects): counted in the run's summary so
    nothing under a root is skipped silently. (ForSt files it leaves alone are reported per job with
    their bytes: statekeeper.gc.forst.per_job.)"""
    from pyspark.sql import functions as F

    judged = _values(SWEPT_KINDS + SWEPT_WHEN_INACTIVE + SWEPT_WHEN_DEAD + METADATA_KINDS)
    return files.where(~F.col("kind").isin(judged))


# Where a reference outside every root of the run points, for the summary: the directory above a
# Flink job directory (`<dir>/<32-hex job id>/shared|taskowned|chk-N/`), else above `shared`,
# `taskowned`, `chk-N` or a savepoint directory, else the file's parent (DSTL, entropy-injected paths).
_LOCATION_PATTERNS = (r"^(.*)/[0-9a-fA-F]{32}/(?:shared|taskowned|chk-[0-9]+)/",
                      r"^(.*)/(?:shared|taskowned|chk-[0-9]+)/",
                      r"^(.*)/savepoint-[^/]+/",
                      r"^(.*)/[^/]*$")


def external_locations(references: Any) -> Any:
    """(location, files) of every location outside the run's roots that a snapshot under them
    references (`references.file_kind` external): jobs there may restore from these roots too."""
    from pyspark.sql import functions as F

    location = F.coalesce(*[F.nullif(F.regexp_extract(F.col("file_uri"), pattern, 1), F.lit(""))
                            for pattern in _LOCATION_PATTERNS], F.col("file_uri"))
    return (references.where(F.col("file_kind") == FileKind.EXTERNAL.value)
            .select(location.alias("location"), "file_uri")
            .groupBy("location").agg(F.countDistinct("file_uri").alias("files")))
