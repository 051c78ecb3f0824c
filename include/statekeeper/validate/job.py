"""The validation job: "will my latest checkpoint actually restore?", for every job at once.

    result = (ValidateCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .configure(ValidateOptions(roots=("s3://bucket/checkpoints", "s3://bucket/savepoints")))
              .execute())
    result.status        # "ok" | "unrestorable" | "quality_failed"

One run reads `snapshots`, `references` and `files` at pinned versions, joins every reference
with the index's listing in Spark (files outside the indexed roots are stat'ed in tasks when a
configured root covers them, else reported as unverifiable), writes `validation_results` and
`validation_jobs` (one commit each), runs the Great Expectations suite over the index tables and
appends a `validation_runs` audit row. It never deletes or rewrites anything in the roots.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.result import JobResult
from statekeeper.jobs.side_by_side import run_side_by_side
from statekeeper.registry import VALIDATE
from statekeeper.storage import Roots
from statekeeper.tables.catalog import VALIDATION_JOBS, VALIDATION_RESULTS, spec as table_spec
from statekeeper.tables.vocabulary import Check, Severity, UnitKind, ValidationRunStatus
from statekeeper.validate.options import ValidateOptions

OK = ValidationRunStatus.OK
UNRESTORABLE = ValidationRunStatus.UNRESTORABLE
QUALITY_FAILED = ValidationRunStatus.QUALITY_FAILED
FAILED = ValidationRunStatus.FAILED
_MAX_LISTED = 50


@dataclass(frozen=True)
class UnrestorableJob:
    location: str
    job_id: str | None
    newest_uri: str
    newest_checkpoint_id: int | None
    latest_restorable_uri: str | None
    latest_restorable_checkpoint_id: int | None
    errors: tuple[str, ...]             # checks that failed on the newest checkpoint


@dataclass(frozen=True, kw_only=True)
class ValidationResult(JobResult):
    roots: tuple[str, ...]
    source_versions: dict[str, int]
    snapshots: int = 0
    snapshots_with_errors: int = 0
    snapshots_with_warnings: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    jobs: int = 0
    jobs_unrestorable: int = 0
    unrestorable: tuple[UnrestorableJob, ...] = ()
    files_statted: int = 0
    quality_success: bool | None = None
    quality_failures: tuple[str, ...] = ()
    report_uri: str | None = None

    def summary(self) -> str:
        lines = [f"validation run {self.run_id} {self.status} in {self.seconds:.1f}s: {self.snapshots} snapshots "
                 f"({self.snapshots_with_errors} with errors, {self.snapshots_with_warnings} with warnings only), "
                 f"{self.jobs} job/savepoint directories, {self.jobs_unrestorable} job(s) whose newest retained "
                 f"checkpoint is NOT restorable; findings {dict(sorted(self.findings.items()))}; "
                 f"{self.files_statted} file(s) outside the indexed roots looked at; index versions "
                 f"{self.source_versions}"]
        for job in self.unrestorable:
            fallback = (f"latest restorable: {job.latest_restorable_uri} (checkpoint {job.latest_restorable_checkpoint_id})"
                        if job.latest_restorable_uri else "no restorable checkpoint left")
            lines.append(f"  UNRESTORABLE job {job.job_id or '-'} at {job.location}: newest checkpoint "
                         f"{job.newest_checkpoint_id} ({job.newest_uri}) fails {', '.join(job.errors) or 'checks'}; "
                         f"{fallback}")
        if self.jobs_unrestorable > len(self.unrestorable):
            lines.append(f"  ... and {self.jobs_unrestorable - len(self.unrestorable)} more (see validation_jobs)")
        if self.quality_success is False:
            lines.append(f"  index quality suite FAILED ({len(self.quality_failures)} expectation(s)): "
                         + "; ".join(self.quality_failures[:10]))
        if self.report_uri:
            lines.append(f"  data docs: {self.report_uri}")
        lines += self._closing_lines()
        return "\n".join(lines)

    def audit_values(self) -> dict[str, Any]:
        return {"unrestorable": [j.newest_uri for j in self.unrestorable]}


class ValidateCheckpoints(StatekeeperJob[ValidationResult, ValidateOptions]):
    """Builder for one validation run. Every option is explicit; `execute()` runs it."""

    JOB = VALIDATE
    SOURCES = ("snapshots", "references", "files")
    # inline_state is an index table: its version comes from the same cut. The chains tables are
    # read at their latest version.
    OPTIONAL_SOURCES = ("inline_state", "dependencies", "pins")

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self._stat_roots: list[str] = []

    # -- run ------------------------------------------------------------------------------------

    def _check_options(self) -> None:
        super()._check_options()
        self._stat_roots = Roots(list(self.options.roots)).uris if self.options.roots else []   # overlaps, schemes: up front

    def _prepare(self, ctx: RunContext) -> None:
        if self.inputs.stale:
            ctx.log.warning("%s: inputs computed from another index cut (the quality suite checks them as they are): %s",
                            ctx.label, "; ".join(self.inputs.stale))

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        return {"roots": tuple(self._stat_roots)}

    def _run(self, ctx: RunContext) -> ValidationResult:
        from statekeeper.validate.quality import QualitySuite

        # GX is imported and set up in the background while Spark does the checks.
        suite = QualitySuite(ctx.spark, ctx.warehouse, ctx.run_id) if self.options.quality_suite else None
        try:
            return self._validated(ctx, suite)
        except BaseException:
            if suite is not None:
                suite.abandon()
            raise

    def _validated(self, ctx: RunContext, suite: Any) -> ValidationResult:
        from statekeeper.validate.quality import cross_table_assets

        beat, log = ctx.beat, ctx.log
        clock = time.monotonic()
        tables = self._read_cut(ctx)
        if suite is not None:
            self._table_metrics(ctx, suite, tables)

        beat.phase("locating references")
        uses = self._located(ctx, tables)
        log.info("%s: references located (%.1fs)", ctx.label, time.monotonic() - clock)
        found, stat, statted = self._found(ctx, uses, tables)
        log.info("%s: findings done, %d file(s) outside the indexed roots looked at (%.1fs)",
                 ctx.label, statted, time.monotonic() - clock)
        beat.phase("checks")
        results, jobs = self._summarized(ctx, uses, found, tables)
        log.info("%s: checks done (%.1fs)", ctx.label, time.monotonic() - clock)
        ctx.deferred.settle()   # the cut check, before the suite's Data Docs or any table is written
        if suite is not None:
            suite.submit(cross_table_assets(tables, found, stat))
            suite.close()
        counts = _counts(results, jobs)
        # the listing is a query of its own (a join and a sort): only when there is something to list
        unrestorable = self._unrestorable(jobs, results) if counts["jobs_unrestorable"] else ()

        metadata = ctx.commit_metadata(**{"statekeeper.sourceVersions": json.dumps(self.inputs.versions,
                                                                                  sort_keys=True)})
        beat.phase("writing validation_results and validation_jobs")
        committed = ctx.write_all([(VALIDATION_RESULTS, results), (VALIDATION_JOBS, jobs)], metadata=metadata)
        log.info("%s: tables written (%.1fs)", ctx.label, time.monotonic() - clock)
        quality = suite.result() if suite is not None else None
        if quality is not None:
            log.info("%s: quality suite done (%.1fs)", ctx.label, time.monotonic() - clock)

        if quality is not None and not quality.success:
            status = QUALITY_FAILED
        elif counts["jobs_unrestorable"]:
            status = UNRESTORABLE
        else:
            status = OK
        return self._result(
            ctx, status, table_versions=committed, unrestorable=unrestorable, files_statted=int(stat.count()),
            quality_success=None if quality is None else quality.success,
            quality_failures=() if quality is None else quality.failures,
            report_uri=None if quality is None else quality.docs_uri, **counts)

    @staticmethod
    def _located(ctx: RunContext, tables: dict[str, Any]) -> Any:
        """Every reference with the file it names (`uses`), kept."""
        from statekeeper.layout.spark_locate import file_uses

        return ctx.keep(file_uses(tables["references"], tables["snapshots"], tables["files"]))

    def _found(self, ctx: RunContext, uses: Any, tables: dict[str, Any]) -> tuple[Any, Any, int]:
        """The findings (kept), the stat of each file outside the indexed roots, in Spark tasks (kept), and
        how many files were stat'ed.

        The per-file findings (after the stat) and the others (cross-directory uses, unusable `_metadata`) are
        built and run side by side: building a plan is ~0.4 s of the driver's round trips to the JVM on a
        small store (each step of a DataFrame is analyzed), during which the other's tasks can run."""
        from statekeeper.layout.spark_locate import direct_edges
        from statekeeper.validate import spark_checks as sc
        from statekeeper.validate.stat import STAT_SPARK_SCHEMA, StatTask

        snaps, files = tables["snapshots"], tables["files"]
        statted = ctx.spark.sparkContext.accumulator(0)

        def per_file() -> tuple[Any, Any]:
            ctx.beat.phase("stat of files outside the indexed roots", lambda: f"{statted.value} file(s) looked at")
            task = StatTask(self._stat_roots, ctx.storage, self.options.stat_threads, statted)
            stat = ctx.keep(sc.outside_files(uses).mapInArrow(task, STAT_SPARK_SCHEMA))
            return stat, ctx.keep(sc.file_findings(sc.evidence(uses, stat), files, snaps))

        parts = run_side_by_side(ctx.spark, ctx.beat, {
            "file findings": per_file,
            "cross-directory findings": lambda: ctx.keep(sc.cross_directory_findings(direct_edges(uses))
                                                         .unionByName(sc.metadata_findings(snaps)))})
        stat, file_found = parts["file findings"]
        return file_found.unionByName(parts["cross-directory findings"]), stat, statted.value

    def _summarized(self, ctx: RunContext, uses: Any, found: Any, tables: dict[str, Any]) -> tuple[Any, Any]:
        """The rows of validation_results and validation_jobs (both kept)."""
        from pyspark.sql import functions as F

        from statekeeper.tables.spark import bucket_of
        from statekeeper.validate import spark_checks as sc

        snaps = tables["snapshots"]
        summary = sc.snapshot_summary(snaps, uses, found)
        now = datetime.now(timezone.utc)
        info = sc.snapshot_info(snaps).drop("status", "error")
        results = ctx.keep(found.withColumn("restorable", F.lit(None).cast("boolean")).unionByName(summary)
                           .join(info, "snapshot_uri", "inner")
                           .withColumn("run_id", F.lit(ctx.run_id)).withColumn("validated_at", F.lit(now))
                           .withColumn("bucket", bucket_of("job_dir"))
                           .select(*VALIDATION_RESULTS.schema.names))
        jobs = ctx.keep(sc.job_health(results).withColumn("bucket", bucket_of("job_dir"))
                        .select(*VALIDATION_JOBS.schema.names))
        return results, jobs

    def _table_metrics(self, ctx: RunContext, suite: Any, tables: dict[str, Any]) -> None:
        """The suite's metrics of the index tables (and the chains tables, when present), computed in
        Spark beside the checks."""
        from statekeeper.validate.quality import table_assets

        extra = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        specs = {n: table_spec(n) for n in ("files", "snapshots", "references", "inline_state",
                                            "dependencies", "pins")}
        suite.submit(table_assets({**tables, **extra}, specs))

    @staticmethod
    def _unrestorable(jobs: Any, results: Any) -> tuple[UnrestorableJob, ...]:
        """The first jobs (by location) whose newest checkpoint fails, with the checks it fails."""
        from pyspark.sql import functions as F

        bad = (jobs.where((F.col("kind") == UnitKind.JOB) & ~F.col("newest_restorable"))
               .orderBy("location").limit(_MAX_LISTED))
        checks = (results.where((F.col("severity") == Severity.ERROR) & (F.col("check") != Check.SNAPSHOT))
                  .groupBy("snapshot_uri").agg(F.sort_array(F.collect_set("check")).alias("checks")))
        rows = (bad.join(checks, bad["newest_uri"] == checks["snapshot_uri"], "left")
                .orderBy("location").collect())
        return tuple(UnrestorableJob(r["location"], r["job_id"], r["newest_uri"], r["newest_checkpoint_id"],
                                     r["latest_restorable_uri"], r["latest_restorable_checkpoint_id"],
                                     tuple(r["checks"] or ())) for r in rows)


def _counts(results: Any, jobs: Any) -> dict[str, Any]:
    """The Result's counts: snapshots (with errors, with warnings only), findings by check, jobs and
    jobs whose newest retained checkpoint does not restore.

    The findings are counted in `results`, one query with the snapshot rows: every finding is there, since a
    consistent cut has no reference of a snapshot the index does not hold (jobs.inputs.check_consistent)."""
    from pyspark.sql import functions as F

    by_check: dict[str, int] = {}
    summaries: dict[str, int] = {}   # the snapshot rows, by severity
    for r in results.groupBy("check", "severity").agg(F.count(F.lit(1)).alias("n")).collect():
        into, key = (summaries, r["severity"]) if r["check"] == Check.SNAPSHOT else (by_check, r["check"])
        into[key] = into.get(key, 0) + int(r["n"])
    job_counts = jobs.agg(F.count(F.lit(1)).alias("n"), F.sum(
        F.when((F.col("kind") == UnitKind.JOB) & ~F.col("newest_restorable"), 1).otherwise(0)).alias("bad")).first()
    return {"snapshots": sum(summaries.values()), "snapshots_with_errors": summaries.get(Severity.ERROR.value, 0),
            "snapshots_with_warnings": summaries.get(Severity.WARNING.value, 0), "findings": by_check,
            "jobs": int(job_counts["n"] or 0), "jobs_unrestorable": int(job_counts["bad"] or 0)}
