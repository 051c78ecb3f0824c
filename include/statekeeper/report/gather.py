"""The numbers of a report, aggregated in Spark from the warehouse's tables.

Every aggregate runs in Spark over the pinned tables and only what a page shows reaches the
driver: the top N rows of each view (`Limits`) and the totals of all rows, never a listing, a plan
or an index. Distinct files are counted once per edge or directory even when many snapshots (or
segments of one file) reference them, so "pinned" and the edges' bytes are bytes on storage.
The small audit tables (`*_runs`) are read without Spark (statekeeper.tables.reader).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from statekeeper.jobs.gc_runs import ClaimableTail, ForstJob, OwnerlessDir
from statekeeper.report.model import (
    CompactionSummary,
    DrCopyRef,
    DrSummary,
    GcSummary,
    JobHealth,
    JobStorage,
    LineageEdge,
    LineageNode,
    MetadataPoint,
    OperatorInline,
    OutcomeCount,
    StorageTotals,
    TrendPoint,
)
from statekeeper.layout.locate import unit_kind
from statekeeper.layout.spark_locate import job_of
from statekeeper.report.options import Limits
from statekeeper.tables.reader import TableReader
from statekeeper.tables.vocabulary import (
    Check,
    DrCopyStatus,
    DrSelectedBy,
    FileKind,
    GcOutcome,
    GcRunStatus,
    Severity,
    UnitKind,
)


_UNREAD = object()   # a cached read not made yet (None is a valid answer)
# Columns naming a directory below a root. The index names a unit by its directory (a root that is a job's
# own directory has a unit per chk-N and one for shared/); the page shows jobs, as validation_jobs names
# them (`spark_locate.job_of`).
_DIRECTORY_COLUMNS = ("job_dir", "file_job_dir")


def job_frames(frames: dict[str, Any]) -> dict[str, Any]:
    """`frames` with every directory column naming the job directory, so that per-directory views, lineage
    and health join and count the same job, whatever level its root was given at."""
    out = {}
    for name, df in frames.items():
        for column in _DIRECTORY_COLUMNS:
            if column in df.columns:
                df = df.withColumn(column, job_of(column))
        out[name] = df
    return out


class Gatherer:
    """One report's aggregations over DataFrames of the pinned tables (`frames`, by table name;
    optional derived tables may be absent) and the audit tables through `reader`."""

    def __init__(self, frames: dict[str, Any], reader: TableReader, limits: Limits,
                 keep: Callable[[Any], Any] = lambda df: df) -> None:
        self.frames = frames
        self.reader = reader
        self.limits = limits
        self._keep = keep
        self._dirs: Any = None
        self._cross: Any = None
        self._gc_run: Any = _UNREAD

    def cross_uses(self) -> Any:
        """Distinct (directory, target directory, file) where snapshots of the directory use a listed file
        of another directory, with the file's size. Kept: pinned bytes and the lineage edges both come
        from it (one scan of `references`)."""
        if self._cross is None:
            from pyspark.sql import functions as F

            refs = self.frames["references"]
            files = self.frames["files"].select("uri", "size")
            self._cross = self._keep(
                refs.where(F.col("file_root").isNotNull()
                           & ((F.col("file_root") != F.col("root")) | (F.col("file_job_dir") != F.col("job_dir"))))
                .select("root", "job_dir", F.col("file_root").alias("target_root"),
                        F.col("file_job_dir").alias("target_job_dir"), F.col("file_uri").alias("uri"))
                .distinct().join(files, "uri"))
        return self._cross

    # -- storage per directory ---------------------------------------------------------------------------
    def directories(self) -> Any:
        """One row per (root, job_dir): files, bytes, pinned, reclaimable, snapshots, `_metadata` and
        inline bytes. Kept: every view below starts from it."""
        if self._dirs is not None:
            return self._dirs
        from pyspark.sql import functions as F

        files = self.frames["files"]
        per_dir = files.groupBy("root", "job_dir").agg(
            F.count(F.lit(1)).alias("files"), F.sum("size").alias("total_bytes"),
            F.max("job_id").alias("job_id"))
        pinned = (self.cross_uses().select(F.col("target_root").alias("root"), F.col("target_job_dir").alias("job_dir"),
                                           "uri", "size").distinct()
                  .groupBy("root", "job_dir").agg(F.count(F.lit(1)).alias("pinned_files"),
                                                  F.sum("size").alias("pinned_bytes")))
        snaps = self.frames["snapshots"].groupBy("root", "job_dir").agg(
            F.count(F.lit(1)).alias("snapshots"), F.sum("metadata_size").alias("metadata_bytes"),
            F.sum(F.coalesce("inline_bytes", F.lit(0))).alias("inline_bytes"))
        out = per_dir.join(pinned, ["root", "job_dir"], "left").join(snaps, ["root", "job_dir"], "left")
        plan = self.gc_plan_frame()
        if plan is not None:
            reclaim = (plan.where(F.col("outcome") == GcOutcome.PLANNED.value).groupBy("root", "job_dir")
                       .agg(F.count(F.lit(1)).alias("reclaimable_files"), F.sum("size").alias("reclaimable_bytes")))
            out = out.join(reclaim, ["root", "job_dir"], "left")
        else:
            out = out.withColumn("reclaimable_files", F.lit(0)).withColumn("reclaimable_bytes", F.lit(0))
        zero = ["pinned_files", "pinned_bytes", "reclaimable_files", "reclaimable_bytes", "snapshots",
                "metadata_bytes", "inline_bytes"]
        self._dirs = self._keep(out.fillna(0, subset=zero))
        return self._dirs

    def storage(self) -> tuple[StorageTotals, tuple[JobStorage, ...]]:
        from pyspark.sql import functions as F

        dirs = self.directories()
        t = dirs.agg(F.count(F.lit(1)).alias("d"), F.sum("files").alias("f"), F.sum("total_bytes").alias("b"),
                     F.sum("pinned_bytes").alias("p"), F.sum("reclaimable_bytes").alias("r"),
                     F.sum("inline_bytes").alias("i"), F.sum("snapshots").alias("s")).first()
        totals = StorageTotals(int(t["d"] or 0), int(t["f"] or 0), int(t["b"] or 0), int(t["p"] or 0),
                               int(t["r"] or 0), int(t["i"] or 0), int(t["s"] or 0))
        top = dirs.orderBy(F.desc("total_bytes"), "root", "job_dir").limit(self.limits.storage).collect()
        return totals, tuple(_job_storage(r) for r in top)

    # -- lineage --------------------------------------------------------------------------------------
    def lineage(self) -> tuple[tuple[LineageNode, ...], tuple[LineageEdge, ...], int, int]:
        """The heaviest cross-directory edges (distinct files and their bytes), their nodes, and the
        count and bytes of all such edges."""
        from pyspark.sql import functions as F

        edges = self._keep(self.cross_uses().groupBy("root", "job_dir", "target_root", "target_job_dir")
                           .agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes")))
        t = edges.agg(F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b")).first()
        top = edges.orderBy(F.desc("bytes"), "root", "job_dir", "target_job_dir").limit(self.limits.edges).collect()
        shown = tuple(LineageEdge(r["root"], r["job_dir"], r["target_root"], r["target_job_dir"], int(r["files"]),
                                  int(r["bytes"] or 0)) for r in top)
        keys = sorted({(e.root, e.job_dir) for e in shown} | {(e.target_root, e.target_job_dir) for e in shown})
        nodes = self._nodes(keys)
        return nodes, shown, int(t["n"] or 0), int(t["b"] or 0)

    def _nodes(self, keys: list[tuple[str, str]]) -> tuple[LineageNode, ...]:
        if not keys:
            return ()
        from pyspark.sql import functions as F

        spark = self.frames["files"].sparkSession
        wanted = F.broadcast(spark.createDataFrame(keys, "root string, job_dir string"))
        found = wanted.join(self.directories().select("root", "job_dir", "job_id", "total_bytes"),
                            ["root", "job_dir"], "left")
        jobs = self.frames.get("validation_jobs")
        if jobs is not None:
            found = found.join(jobs.select("root", "job_dir", "newest_restorable"), ["root", "job_dir"], "left")
        else:
            found = found.withColumn("newest_restorable", F.lit(None).cast("boolean"))
        info = {(r["root"], r["job_dir"]): r for r in found.collect()}
        flags = {key: r["newest_restorable"] for key, r in info.items()}
        nodes = []
        for key in keys:
            row = info.get(key)
            nodes.append(LineageNode(key[0], key[1], row["job_id"] if row is not None else None, str(unit_kind(key[1])),
                                     flags.get(key), int(row["total_bytes"] or 0) if row is not None else 0))
        return tuple(nodes)

    # -- health ---------------------------------------------------------------------------------------
    def health(self) -> tuple[tuple[JobHealth, ...], int, int, int, str | None]:
        """Per job: newest checkpoint, restorable or not with the failing checks, latest restorable,
        last verified DR copy. Unrestorable jobs first. Returns (rows, jobs, unrestorable, directories
        holding snapshots that no validation row covers, validation run id)."""
        from pyspark.sql import functions as F

        jobs = self.frames.get("validation_jobs")
        dirs = self.directories()
        with_snaps = dirs.where(F.col("snapshots") > 0)
        if jobs is None:
            return (), 0, 0, with_snaps.count(), None
        # counted as the validation job counts them (validation_runs.jobs_unrestorable): job directories only
        c = jobs.agg(F.count(F.lit(1)).alias("n"),
                     F.sum(F.when((F.col("kind") == UnitKind.JOB.value) & (F.col("newest_restorable") == F.lit(False)),
                                  1).otherwise(0)).alias("u"),
                     F.max("run_id").alias("run")).first()
        uncovered = with_snaps.join(jobs.select("root", "job_dir"), ["root", "job_dir"], "left_anti").count()
        ranked = (jobs.join(dirs.select("root", "job_dir", "total_bytes"), ["root", "job_dir"], "left")
                  .orderBy(F.when(F.col("newest_restorable") == F.lit(False), 0).otherwise(1),
                           F.desc_nulls_last("total_bytes"), "root", "job_dir")
                  .limit(self.limits.health).collect())
        # at most `limits.health` rows: their keys go back to Spark as literals
        checks: dict[str, tuple[str, ...]] = {}
        results = self.frames.get("validation_results")
        bad = sorted({r["newest_uri"] for r in ranked if r["newest_restorable"] is False and r["newest_uri"]})
        if results is not None and bad:
            for r in (results.where((F.col("severity") == Severity.ERROR.value)
                                    & (F.col("check") != Check.SNAPSHOT.value) & F.col("snapshot_uri").isin(bad))
                      .groupBy("snapshot_uri").agg(F.sort_array(F.collect_set("check")).alias("checks"))
                      .collect()):
                checks[r["snapshot_uri"]] = tuple(r["checks"])
        copies = self._dr_copies(sorted({(r["root"], r["job_dir"]) for r in ranked}), datetime.now(timezone.utc))
        rows = []
        for r in ranked:
            rows.append(JobHealth(
                r["root"], r["job_dir"], r["job_id"], r["kind"], r["status"], int(r["snapshots"] or 0),
                r["newest_uri"], r["newest_checkpoint_id"], r["newest_restorable"], r["latest_restorable_uri"],
                r["latest_restorable_checkpoint_id"], checks.get(r["newest_uri"], ()),
                copies.get((r["root"], r["job_dir"]))))
        return tuple(rows), int(c["n"] or 0), int(c["u"] or 0), uncovered, c["run"]

    def _dr_copies(self, shown: list[tuple[str, str]], now: datetime) -> dict[tuple[str, str], DrCopyRef]:
        """Per shown job: its last verified copy, the age of the newest recovery point a copy holds (RPO) and
        the lags of its last `limits.dr_lags` copies (re-verifications copy nothing and have no lag of their own).
        At most that many rows per shown job reach the driver."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        copies = self.frames.get("dr_copies")
        if copies is None or not shown:
            return {}
        spark = self.frames["files"].sparkSession
        keys = F.broadcast(spark.createDataFrame(shown, "source_root string, job_dir string"))
        newest = Window.partitionBy("source_root", "job_dir").orderBy(F.desc("finished_at"), F.desc("checkpoint_id"))
        found = (copies.where(F.col("status") == DrCopyStatus.VERIFIED.value).join(keys, ["source_root", "job_dir"])
                 .withColumn("n", F.row_number().over(newest)).where(F.col("n") <= max(1, self.limits.dr_lags))
                 .select("source_root", "job_dir", "n", "target_metadata_uri", "checkpoint_id", "finished_at",
                         "selected_by", "source_completed_at", "published_at").collect())
        by_job: dict[tuple[str, str], list[Any]] = {}
        for r in found:
            by_job.setdefault((r["source_root"], r["job_dir"]), []).append(r)
        out = {}
        for key, rows in by_job.items():
            rows.sort(key=lambda r: r["n"])
            first = rows[0]
            points = [_utc(r["source_completed_at"]) for r in rows if r["source_completed_at"] is not None]
            point = max(points) if points else None
            lags = tuple((_utc(r["published_at"]) - _utc(r["source_completed_at"])).total_seconds()
                         for r in reversed(rows)
                         if r["selected_by"] != DrSelectedBy.REVERIFY.value and r["published_at"] is not None
                         and r["source_completed_at"] is not None)
            out[key] = DrCopyRef(first["target_metadata_uri"], first["checkpoint_id"], first["finished_at"], point,
                                 (now - point).total_seconds() if point is not None else None, lags)
        return out

    def dr_verified_jobs(self) -> int:
        from pyspark.sql import functions as F

        copies = self.frames.get("dr_copies")
        if copies is None:
            return 0
        return (copies.where(F.col("status") == DrCopyStatus.VERIFIED.value)
                .select("source_root", "job_dir").distinct().count())

    # -- `_metadata` and inline state ----------------------------------------------------------------
    def metadata(self) -> tuple[tuple[MetadataPoint, ...], tuple[OperatorInline, ...]]:
        """`_metadata` size and inline bytes over checkpoints for the jobs with the largest `_metadata`
        (their newest `metadata_points` snapshots), and the operators with the most inline bytes."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        snaps = self.frames["snapshots"].where(F.col("layout_kind") == FileKind.CHECKPOINT_METADATA.value)
        biggest = (snaps.groupBy("root", "job_dir").agg(F.max("metadata_size").alias("m"))
                   .orderBy(F.desc("m"), "root", "job_dir").limit(self.limits.metadata_jobs))
        newest = Window.partitionBy("root", "job_dir").orderBy(F.desc_nulls_last("checkpoint_id"),
                                                                F.desc("metadata_mtime"))
        points = (snaps.join(F.broadcast(biggest.select("root", "job_dir")), ["root", "job_dir"])
                  .withColumn("n", F.row_number().over(newest)).where(F.col("n") <= self.limits.metadata_points)
                  .select("root", "job_dir", "checkpoint_id", "metadata_size", "inline_bytes").collect())
        series = tuple(sorted((MetadataPoint(r["root"], r["job_dir"], r["checkpoint_id"], int(r["metadata_size"]),
                                             int(r["inline_bytes"] or 0)) for r in points),
                              key=lambda p: (p.root, p.job_dir, p.checkpoint_id if p.checkpoint_id is not None else -1)))
        operators: tuple[OperatorInline, ...] = ()
        inline = self.frames.get("inline_state")
        if inline is not None:
            per_snapshot = (inline.groupBy("root", "job_dir", "operator_id", "operator_name", "operator_uid",
                                           "snapshot_uri").agg(F.sum("inline_bytes").alias("b")))
            top = (per_snapshot.groupBy("root", "job_dir", "operator_id", "operator_name", "operator_uid")
                   .agg(F.count(F.lit(1)).alias("snapshots"), F.sum("b").alias("inline_bytes"),
                        F.max("b").alias("max_b"))
                   .orderBy(F.desc("inline_bytes"), "root", "job_dir", "operator_id").limit(self.limits.operators)
                   .collect())
            operators = tuple(OperatorInline(r["root"], r["job_dir"],
                                             r["operator_name"] or r["operator_uid"] or r["operator_id"] or "?",
                                             r["operator_id"], int(r["snapshots"]), int(r["inline_bytes"] or 0),
                                             int(r["max_b"] or 0)) for r in top)
        return series, operators

    # -- GC, compaction, DR ---------------------------------------------------------------------------
    def newest_gc_run(self) -> dict[str, Any] | None:
        """The newest row of `gc_runs` (an event log: the newest row is the newest run's latest state)."""
        if self._gc_run is _UNREAD:
            self._gc_run = self.reader.newest("gc_runs")
        return self._gc_run

    def gc_plan_frame(self) -> Any:
        """The newest GC run's plan rows (its plan run's partition of gc_actions), or None."""
        run = self.newest_gc_run()
        actions = self.frames.get("gc_actions")
        if run is None or actions is None or run["status"] in (GcRunStatus.REQUESTED.value,):
            return None
        from pyspark.sql import functions as F

        return actions.where(F.col("run_id") == (run["plan_run_id"] or run["run_id"]))

    def gc(self) -> GcSummary | None:
        run = self.newest_gc_run()
        if run is None:
            return None
        outcomes: tuple[OutcomeCount, ...] = ()
        plan = self.gc_plan_frame()
        if plan is not None:
            from pyspark.sql import functions as F

            outcomes = tuple(OutcomeCount(r["reason"], r["outcome"], int(r["files"]), int(r["bytes"] or 0))
                             for r in plan.groupBy("reason", "outcome").agg(
                                 F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes"))
                             .orderBy("reason", "outcome").collect())
        return GcSummary(run["run_id"], run["plan_run_id"] or run["run_id"], run["status"], run["mode"],
                         run["finished_at"], run["planned"], run["planned_bytes"], run["deleted"],
                         run["deleted_bytes"], run["already_gone"], run["changed_skipped"], run["failed"],
                         tuple(run["blocked"] or ()), outcomes,
                         # absent in rows older than their columns
                         tuple(OwnerlessDir.from_row(d) for d in run.get("ownerless") or ()),
                         tuple(ForstJob(**d) for d in run.get("forst") or ()),
                         tuple(ClaimableTail.from_row(d) for d in run.get("claimable") or ()))

    def compaction(self) -> CompactionSummary | None:
        run = self.reader.newest("compaction_runs")
        if run is None:
            return None
        statuses: dict[str, int] = {}
        compactions = self.frames.get("compactions")
        if compactions is not None:
            from pyspark.sql import functions as F

            statuses = {r["status"]: int(r["n"]) for r in compactions.where(F.col("run_id") == run["run_id"])
                        .groupBy("status").agg(F.count(F.lit(1)).alias("n")).collect()}
        return CompactionSummary(run["run_id"], run["status"], run["mode"], run["finished_at"], run["selected"],
                                 run["compacted"], run["failed"], run["metadata_bytes_before"],
                                 run["metadata_bytes_after"], tuple(run["problems"] or ()), statuses)

    def dr(self) -> DrSummary | None:
        run = self.reader.newest("dr_runs")
        if run is None:
            return None
        return DrSummary(run["run_id"], run["status"], run["mode"], run["finished_at"], run["snapshots"],
                         run["verified"], run["failed"], run["bytes_copied"], tuple(run["problems"] or ()))

    def trend(self, current: TrendPoint) -> tuple[TrendPoint, ...]:
        """The report runs before this one (report_runs), oldest first, then `current`."""
        points = [TrendPoint(r["run_id"], r["finished_at"], r["bytes_total"], r["bytes_pinned"],
                             r["bytes_reclaimable"], r["bytes_inline"], r["jobs_unrestorable"])
                  for r in self.reader.read("report_runs").to_pylist()   # absent table: no rows
                  if r["status"] == "succeeded" and r["run_id"] != current.run_id]
        points.sort(key=lambda p: p.at)
        return (*points[-(self.limits.trend_runs - 1):], current)


def _utc(value: datetime) -> datetime:
    """PySpark hands a collected timestamp back naive, in the driver process's local time zone."""
    return value.astimezone(timezone.utc)


def _job_storage(r: Any) -> JobStorage:
    return JobStorage(r["root"], r["job_dir"], r["job_id"], int(r["files"]), int(r["total_bytes"] or 0),
                      int(r["pinned_files"]), int(r["pinned_bytes"]), int(r["reclaimable_files"]),
                      int(r["reclaimable_bytes"]), int(r["snapshots"]), int(r["metadata_bytes"]),
                      int(r["inline_bytes"]))

