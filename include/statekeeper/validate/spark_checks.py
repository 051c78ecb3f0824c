"""The validation checks as Spark DataFrame transformations (joins, no driver collects).

    uses      = chains.spark_graph.file_uses(references, snapshots, files)   (with listed sizes)
    outside   = outside_files(uses)                      files no indexed root covers -> stat'ed in tasks
    evidence  = evidence(uses, stat)                     per (snapshot, file): listing / stat facts
    found     = file_findings(evidence, files)           file_exists, relative_resolves, file_size, ...
              + cross_directory_findings(direct)         warnings
              + metadata_findings(snapshots)             metadata_parses
    summary   = snapshot_summary(snapshots, uses, found) one `snapshot` row per snapshot
    jobs      = job_health(summary)                      newest / latest restorable per job directory

The per-file findings are worded by statekeeper.validate.checks in the tasks, the others by SQL
expressions (statekeeper.validate.wording).
"""
from __future__ import annotations

from typing import Any

from statekeeper.layout.spark_locate import job_location_of, job_of, unit_kind_of
from statekeeper.tables.spark import spark_schema
from statekeeper.tables.vocabulary import (
    FOREIGN_RELATIONS,
    Check,
    JobHealth,
    Severity,
    SnapshotStatus,
    SnapshotType,
)
from statekeeper.validate import wording
from statekeeper.validate.checks import EVIDENCE_COLUMNS, FINDING_SCHEMA, STAT_FOUND, findings_batches

FINDING_COLUMNS = ("snapshot_uri", "check", "severity", "subject", "detail", "files", "bytes")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def outside_files(uses: Any) -> Any:
    """Distinct referenced files under no indexed root (the listing cannot vouch for them)."""
    F = _F()
    return uses.where(F.col("file_root").isNull() & ~F.col("is_dir")).select("file_uri").distinct()


def evidence(uses: Any, stat: Any) -> Any:
    """EVIDENCE_COLUMNS per (snapshot, referenced file), directories excluded."""
    F = _F()
    u = uses.where(~F.col("is_dir"))
    return (u.join(stat, "file_uri", "left")
            .select("snapshot_uri", "file_uri", F.col("file_root").isNotNull().alias("indexed_root"), "listed_size",
                    "stat_status", "stat_size", "stat_error", "extent",
                    F.coalesce(F.col("segmented"), F.lit(False)).alias("segmented"),
                    F.coalesce(F.col("relative"), F.lit(False)).alias("relative"), "relative_name"))


def file_findings(ev: Any, files: Any, snapshots: Any) -> Any:
    """Findings of the referenced files: SQL picks the rows that cannot be fine, Python words them."""
    F = _F()
    present_size = F.when(F.col("indexed_root"), F.col("listed_size")).otherwise(
        F.when(F.col("stat_status") == STAT_FOUND, F.col("stat_size")))
    exists = F.when(F.col("indexed_root"), F.col("listed_size").isNotNull()).otherwise(
        F.col("stat_status") == STAT_FOUND)
    suspicious = ev.where(~exists | (F.col("extent").isNotNull() & (present_size < F.col("extent"))))
    found = suspicious.select(*EVIDENCE_COLUMNS).mapInArrow(findings_batches, spark_schema(FINDING_SCHEMA))
    found = found.withColumn("files", F.lit(1).cast("long"))
    # Say where a file of the missing relative name does exist (FLINK-39964 leaves it in the
    # restored savepoint's directory).
    rel = found.where(F.col("check") == Check.RELATIVE_RESOLVES).withColumn(
        "name", F.regexp_extract("subject", "[^/]*$", 0)).alias("r")
    other = found.where(F.col("check") != Check.RELATIVE_RESOLVES)
    # Only the listed files of a name some relative file misses: a join with the whole listing shuffled every
    # file by name (1M objects: ~40 s of one core), even when nothing was missing and the rows were thrown away.
    needed = rel.select("name").distinct()
    names = (files.select(F.regexp_extract("uri", "[^/]*$", 0).alias("name"), F.col("uri").alias("candidate"))
             .join(F.broadcast(needed), "name", "left_semi").alias("n"))
    hinted = (rel.join(names, (F.col("r.name") == F.col("n.name")) & (F.col("n.candidate") != F.col("r.subject")),
                       "left")
              .groupBy(*[F.col(f"r.{c}").alias(c) for c in FINDING_COLUMNS])
              .agg(F.sort_array(F.collect_set("n.candidate")).alias("candidates")))
    types = snapshots.select(F.col("uri").alias("snapshot_uri"), "snapshot_type")
    rel_out = hinted.join(types, "snapshot_uri", "left").select(
        "snapshot_uri", "check", "severity", "subject", wording.relative_hint().alias("detail"), "files", "bytes")
    return other.select(*FINDING_COLUMNS).unionByName(rel_out)


def cross_directory_findings(direct: Any) -> Any:
    F = _F()
    foreign = direct.where(F.col("relation").isin(*sorted(FOREIGN_RELATIONS)))
    return foreign.select("snapshot_uri", F.lit(Check.CROSS_DIRECTORY).alias("check"),
                          F.lit(Severity.WARNING).alias("severity"), F.col("target_uri").alias("subject"),
                          wording.cross_directory_detail().alias("detail"), "files", "bytes")


def metadata_findings(snapshots: Any) -> Any:
    F = _F()
    bad = (snapshots.where(F.col("status") != SnapshotStatus.OK)
           .select(F.col("uri").alias("snapshot_uri"), "status", "error"))
    return bad.select("snapshot_uri", F.lit(Check.METADATA_PARSES).alias("check"),
                      F.lit(Severity.ERROR).alias("severity"), F.lit(None).cast("string").alias("subject"),
                      wording.metadata_detail().alias("detail"),
                      F.lit(None).cast("long").alias("files"), F.lit(None).cast("long").alias("bytes"))


def snapshot_info(snapshots: Any) -> Any:
    F = _F()
    return snapshots.select(F.col("uri").alias("snapshot_uri"), "root", "root_id", "job_dir",
                            F.col("job_id").alias("snapshot_job_id"),
                            F.coalesce("checkpoint_id", "dir_checkpoint_id").alias("snapshot_checkpoint_id"),
                            "snapshot_type", "status", "error")


def snapshot_summary(snapshots: Any, uses: Any, found: Any) -> Any:
    """One `snapshot` row per snapshot (FINDING_COLUMNS + restorable)."""
    F = _F()
    checked = (uses.where(~F.col("is_dir")).groupBy("snapshot_uri")
               .agg(F.count(F.lit(1)).alias("n_files"), F.sum(F.coalesce("extent", F.lit(0))).alias("n_bytes")))
    counts = (found.groupBy("snapshot_uri")
              .agg(F.sum(F.when(F.col("severity") == Severity.ERROR, 1).otherwise(0)).alias("errors"),
                   F.sum(F.when(F.col("severity") == Severity.WARNING, 1).otherwise(0)).alias("warnings")))
    s = (snapshot_info(snapshots).select("snapshot_uri", "status", "error")
         .join(checked, "snapshot_uri", "left").join(counts, "snapshot_uri", "left")
         .select("snapshot_uri", "status", "error",
                 F.coalesce("n_files", F.lit(0)).cast("long").alias("files"),
                 F.coalesce("n_bytes", F.lit(0)).cast("long").alias("bytes"),
                 F.coalesce("errors", F.lit(0)).cast("long").alias("errors"),
                 F.coalesce("warnings", F.lit(0)).cast("long").alias("warnings")))
    s = s.withColumn("detail", wording.snapshot_detail())
    severity = (F.when(F.col("errors") > 0, Severity.ERROR).when(F.col("warnings") > 0, Severity.WARNING)
                .otherwise(Severity.OK))
    return s.select("snapshot_uri", F.lit(Check.SNAPSHOT).alias("check"), severity.alias("severity"),
                    F.lit(None).cast("string").alias("subject"), "detail", "files", "bytes",
                    (F.col("errors") == 0).alias("restorable"))


def job_health(results: Any) -> Any:
    """Per job location: newest retained checkpoint, whether it restores, latest restorable.

    `results` are validation_results rows; only the `snapshot` summary rows are used. Within a job
    directory checkpoints rank above other snapshot types, then by checkpoint id (so a corrupt
    newest `_metadata`, whose id comes from its chk-N directory name, still counts as newest).
    """
    F = _F()
    s = results.where(F.col("check") == Check.SNAPSHOT)
    s = s.select("*", job_of().alias("loc_job_dir"), unit_kind_of().alias("kind"), job_location_of().alias("location"))
    rank = F.struct((F.col("snapshot_type") == SnapshotType.CHECKPOINT).cast("int").alias("c"),
                    F.coalesce("snapshot_checkpoint_id", F.lit(-1)).alias("id"), F.col("snapshot_uri").alias("uri"))
    newest = F.max(F.struct(rank.alias("k"), F.col("restorable").alias("ok"),
                            F.col("snapshot_checkpoint_id").alias("cid")))
    latest = F.max(F.when(F.col("restorable"), F.struct(rank.alias("k"), F.col("snapshot_checkpoint_id").alias("cid"))))
    g = (s.groupBy("run_id", "root", "root_id", F.col("loc_job_dir").alias("job_dir"), "location", "kind",
                   "validated_at")
         .agg(F.max("snapshot_job_id").alias("job_id"), F.count(F.lit(1)).alias("snapshots"),
              F.sum(F.when(F.col("severity") == Severity.ERROR, 1).otherwise(0)).cast("long")
              .alias("snapshots_with_errors"),
              F.sum(F.when(F.col("severity") == Severity.WARNING, 1).otherwise(0)).cast("long")
              .alias("snapshots_with_warnings"),
              newest.alias("n"), latest.alias("l")))
    return g.select(
        "run_id", "root", "root_id", "job_dir", "location", "kind", "job_id",
        F.when(F.col("n.ok"), JobHealth.RESTORABLE).otherwise(JobHealth.UNRESTORABLE).alias("status"),
        "snapshots", "snapshots_with_errors", "snapshots_with_warnings",
        F.col("n.k.uri").alias("newest_uri"), F.col("n.cid").alias("newest_checkpoint_id"),
        F.col("n.ok").alias("newest_restorable"), F.col("l.k.uri").alias("latest_restorable_uri"),
        F.col("l.cid").alias("latest_restorable_checkpoint_id"), "validated_at")
