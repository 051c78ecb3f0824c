"""The validation job: "will my latest checkpoint actually restore?", for every job at once.

    result = (ValidateCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .roots("s3://bucket/checkpoints", "s3://bucket/savepoints")
              .storage(StorageConfig.from_env())
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
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper import __version__
from statekeeper.chains.sources import check_consistent, read_pinned
from statekeeper.storage import Roots, StorageConfig
from statekeeper.tables import cut, delta_log
from statekeeper.tables.catalog import spec as index_spec
from statekeeper.tables.errors import TableError
from statekeeper.tables.warehouse import Warehouse
from statekeeper.validate.checks import ERROR, SNAPSHOT, WARNING
from statekeeper.validate.tables import VALIDATION_JOBS, VALIDATION_RESULTS, VALIDATION_RUNS

log = logging.getLogger("statekeeper.validate")

OK = "ok"                          # every job's newest retained checkpoint is restorable
UNRESTORABLE = "unrestorable"      # some job's newest retained checkpoint is not
QUALITY_FAILED = "quality_failed"  # the index tables failed their quality suite: answers untrustworthy
FAILED = "failed"                  # the run itself failed
SOURCES = ("snapshots", "references", "files")
OPTIONAL_SOURCES = ("inline_state", "dependencies", "pins")
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


@dataclass(frozen=True)
class ValidationResult:
    run_id: str
    status: str
    started_at: datetime
    finished_at: datetime
    warehouse: str
    roots: tuple[str, ...]
    source_versions: dict[str, int]
    table_versions: dict[str, int | None] = field(default_factory=dict)
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
    error: str | None = None

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

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
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    def to_mapping(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat(), "seconds": round(self.seconds, 3),
                "warehouse": self.warehouse, "roots": list(self.roots), "source_versions": self.source_versions,
                "table_versions": self.table_versions, "snapshots": self.snapshots,
                "snapshots_with_errors": self.snapshots_with_errors,
                "snapshots_with_warnings": self.snapshots_with_warnings, "findings": self.findings,
                "jobs": self.jobs, "jobs_unrestorable": self.jobs_unrestorable,
                "unrestorable": [job.__dict__ | {"errors": list(job.errors)} for job in self.unrestorable],
                "files_statted": self.files_statted, "quality_success": self.quality_success,
                "quality_failures": list(self.quality_failures), "report_uri": self.report_uri, "error": self.error}


class ValidateCheckpoints:
    """Builder for one validation run. Every option is explicit; `execute()` runs it."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._warehouse: str | Warehouse | None = None
        self._roots: list[str] = []
        self._storage: StorageConfig | None = None
        self._engine = "auto"
        self._run_id: str | None = None
        self._airflow_run_id: str | None = None
        self._quality = True
        self._stat_threads = 8
        self._progress_interval = 10.0

    def warehouse(self, location: str | Warehouse) -> ValidateCheckpoints:
        self._warehouse = location
        return self

    def roots(self, *uris: str) -> ValidateCheckpoints:
        """Where referenced files outside the indexed roots may be stat'ed (none: they are unverifiable)."""
        self._roots.extend(uris)
        return self

    def storage(self, config: StorageConfig) -> ValidateCheckpoints:
        self._storage = config
        return self

    def engine(self, name: str) -> ValidateCheckpoints:
        self._engine = name
        return self

    def run_id(self, run_id: str) -> ValidateCheckpoints:
        self._run_id = run_id
        return self

    def airflow_run(self, run_id: str | None) -> ValidateCheckpoints:
        self._airflow_run_id = run_id or None
        return self

    def quality_suite(self, enabled: bool) -> ValidateCheckpoints:
        self._quality = enabled
        return self

    def stat_threads(self, threads: int) -> ValidateCheckpoints:
        if threads < 1:
            raise ValueError("stat_threads must be >= 1")
        self._stat_threads = threads
        return self

    def progress_interval(self, seconds: float) -> ValidateCheckpoints:
        """Seconds between progress log lines (0 turns them off)."""
        self._progress_interval = seconds
        return self

    # -- run ------------------------------------------------------------------------------------

    def execute(self) -> ValidationResult:
        from statekeeper.tables.engine import select_engine
        from statekeeper.tables.spark import activate

        if self._warehouse is None:
            raise ValueError("no warehouse given")
        storage = self._storage if self._storage is not None else StorageConfig.from_env()
        warehouse = (self._warehouse if isinstance(self._warehouse, Warehouse)
                     else Warehouse(self._warehouse, storage))
        roots = Roots(self._roots).uris if self._roots else []   # validates (overlaps, schemes) up front
        run_id = self._run_id or f"val-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        started = datetime.now(timezone.utc)
        activate(self._spark)
        engine = select_engine(self._spark, self._engine)
        index_cut, versions = cut.pin_cut(warehouse, SOURCES)
        # inline_state is an index table: its version comes from the same cut. The chains tables
        # are read at their latest version.
        optional = {n: v for n in OPTIONAL_SOURCES if n != "inline_state"
                    and (v := delta_log.latest_version(warehouse, n)) is not None}
        if index_cut.version("inline_state") is not None:
            optional["inline_state"] = index_cut.version("inline_state")
        log.info("validation run %s: warehouse %s, stat roots %s, index versions %s", run_id, warehouse.uri,
                 roots or "none", versions)
        try:
            result = self._run(engine, warehouse, storage, roots, run_id, started, versions, optional)
        except BaseException as exc:
            failed = ValidationResult(run_id, FAILED, started, datetime.now(timezone.utc), warehouse.uri, tuple(roots),
                                      versions, error=f"{type(exc).__name__}: {exc}")
            self._audit(engine, warehouse, failed)
            raise
        self._audit(engine, warehouse, result)
        log.info("%s", result.summary())
        return result

    def _run(self, engine: Any, warehouse: Warehouse, storage: StorageConfig, roots: list[str], run_id: str,
             started: datetime, versions: dict[str, int], optional: dict[str, int]) -> ValidationResult:
        from statekeeper.chains.progress import Heartbeat
        from statekeeper.chains.spark_graph import Materialized

        with Materialized() as keep, Heartbeat(self._spark, log, f"validation run {run_id}",
                                               self._progress_interval) as beat:
            return self._compute(engine, warehouse, storage, roots, run_id, started, versions, optional, keep, beat)

    def _compute(self, engine: Any, warehouse: Warehouse, storage: StorageConfig, roots: list[str], run_id: str,
                 started: datetime, versions: dict[str, int], optional: dict[str, int],
                 keep: Any, beat: Any) -> ValidationResult:
        from pyspark.sql import functions as F

        from statekeeper.chains.spark_graph import direct_edges, file_uses
        from statekeeper.tables.spark import bucket_of, bucketed
        from statekeeper.validate import spark_checks as sc
        from statekeeper.validate.stat import STAT_SPARK_SCHEMA, StatTask

        spark = self._spark
        clock = time.monotonic()
        tables = read_pinned(spark, engine, warehouse, versions)
        snaps, refs, files = tables["snapshots"], tables["references"], tables["files"]
        check_consistent(snaps, refs, versions)

        beat.phase("locating references")
        uses = keep(file_uses(refs, snaps, files))
        statted = spark.sparkContext.accumulator(0)
        beat.phase("stat of files outside the indexed roots", lambda: f"{statted.value} file(s) looked at")
        stat = keep(sc.outside_files(uses)
                    .mapInArrow(StatTask(roots, storage, self._stat_threads, statted), STAT_SPARK_SCHEMA))
        log.info("validation run %s: references located, %d file(s) outside the indexed roots looked at (%.1fs)",
                 run_id, statted.value, time.monotonic() - clock)

        beat.phase("checks")
        found = keep(sc.file_findings(sc.evidence(uses, stat), files, snaps)
                     .unionByName(sc.cross_directory_findings(direct_edges(uses)))
                     .unionByName(sc.metadata_findings(snaps)))
        summary = sc.snapshot_summary(snaps, uses, found)
        now = datetime.now(timezone.utc)
        info = sc.snapshot_info(snaps).drop("status", "error")
        results = keep(found.withColumn("restorable", F.lit(None).cast("boolean")).unionByName(summary)
                       .join(info, "snapshot_uri", "inner")
                       .withColumn("run_id", F.lit(run_id)).withColumn("validated_at", F.lit(now))
                       .withColumn("bucket", bucket_of("job_dir"))
                       .select(*VALIDATION_RESULTS.schema.names))
        jobs = keep(sc.job_health(results).withColumn("bucket", bucket_of("job_dir"))
                    .select(*VALIDATION_JOBS.schema.names))
        log.info("validation run %s: checks done (%.1fs)", run_id, time.monotonic() - clock)

        counts = results.where(F.col("check") == SNAPSHOT).agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(F.col("severity") == ERROR, 1).otherwise(0)).alias("err"),
            F.sum(F.when(F.col("severity") == WARNING, 1).otherwise(0)).alias("warn")).first()
        by_check = {r["check"]: int(r["n"]) for r in
                    found.groupBy("check").agg(F.count(F.lit(1)).alias("n")).collect()}
        job_counts = jobs.agg(F.count(F.lit(1)).alias("n"), F.sum(
            F.when((F.col("kind") == "job") & ~F.col("newest_restorable"), 1).otherwise(0)).alias("bad")).first()
        unrestorable = self._unrestorable(jobs, results)

        metadata = {"statekeeper.runId": run_id, "statekeeper.operation": "validate",
                    "statekeeper.sourceVersions": json.dumps(versions, sort_keys=True)}
        committed: dict[str, int | None] = {}
        beat.phase("writing validation_results and validation_jobs")
        for spec, df in ((VALIDATION_RESULTS, results), (VALIDATION_JOBS, jobs)):
            outcome = engine.write(bucketed(df, spec), warehouse, spec, mode="overwrite",
                                   metadata=metadata)
            committed[spec.name] = outcome.version
        log.info("validation run %s: tables written (%.1fs)", run_id, time.monotonic() - clock)

        quality = None
        if self._quality:
            from statekeeper.chains.tables import DEPENDENCIES, PINS
            from statekeeper.validate.quality import build_assets, run_suite

            beat.phase("quality suite")
            extra = read_pinned(spark, engine, warehouse, optional)
            specs = {n: index_spec(n) for n in ("files", "snapshots", "references", "inline_state")}
            specs.update({"dependencies": DEPENDENCIES, "pins": PINS})
            quality = run_suite(build_assets({**tables, **extra}, specs, found, stat), warehouse, run_id)
            log.info("validation run %s: quality suite done (%.1fs)", run_id, time.monotonic() - clock)

        bad_jobs = int(job_counts["bad"] or 0)
        if quality is not None and not quality.success:
            status = QUALITY_FAILED
        elif bad_jobs:
            status = UNRESTORABLE
        else:
            status = OK
        return ValidationResult(
            run_id, status, started, datetime.now(timezone.utc), warehouse.uri, tuple(roots), versions, committed,
            int(counts["n"] or 0), int(counts["err"] or 0), int(counts["warn"] or 0), by_check,
            int(job_counts["n"] or 0), bad_jobs, unrestorable, int(stat.count()),
            None if quality is None else quality.success, () if quality is None else quality.failures,
            None if quality is None else quality.docs_uri)

    @staticmethod
    def _unrestorable(jobs: Any, results: Any) -> tuple[UnrestorableJob, ...]:
        """The first jobs (by location) whose newest checkpoint fails, with the checks it fails."""
        from pyspark.sql import functions as F

        bad = (jobs.where((F.col("kind") == "job") & ~F.col("newest_restorable"))
               .orderBy("location").limit(_MAX_LISTED))
        checks = (results.where((F.col("severity") == ERROR) & (F.col("check") != SNAPSHOT))
                  .groupBy("snapshot_uri").agg(F.sort_array(F.collect_set("check")).alias("checks")))
        rows = (bad.join(checks, bad["newest_uri"] == checks["snapshot_uri"], "left")
                .orderBy("location").collect())
        return tuple(UnrestorableJob(r["location"], r["job_id"], r["newest_uri"], r["newest_checkpoint_id"],
                                     r["latest_restorable_uri"], r["latest_restorable_checkpoint_id"],
                                     tuple(r["checks"] or ())) for r in rows)

    def _audit(self, engine: Any, warehouse: Warehouse, result: ValidationResult) -> None:
        import pyarrow as pa

        row = {
            "run_id": result.run_id, "status": result.status, "started_at": result.started_at,
            "finished_at": result.finished_at, "warehouse": result.warehouse, "roots": list(result.roots),
            "statekeeper_version": __version__, "source_versions": list(result.source_versions.items()),
            "table_versions": [(k, v) for k, v in result.table_versions.items() if v is not None],
            "snapshots": result.snapshots, "snapshots_with_errors": result.snapshots_with_errors,
            "snapshots_with_warnings": result.snapshots_with_warnings, "findings": list(result.findings.items()),
            "jobs": result.jobs, "jobs_unrestorable": result.jobs_unrestorable,
            "unrestorable": [j.newest_uri for j in result.unrestorable], "files_statted": result.files_statted,
            "quality_success": result.quality_success, "quality_failures": list(result.quality_failures),
            "report_uri": result.report_uri, "airflow_run_id": self._airflow_run_id, "error": result.error,
        }
        df = self._spark.createDataFrame(pa.Table.from_pylist([row], schema=VALIDATION_RUNS.schema))
        try:
            engine.write(df, warehouse, VALIDATION_RUNS, mode="append", metadata={"statekeeper.runId": result.run_id})
        except TableError:
            if result.status != FAILED:
                raise
            log.exception("could not record the failed run %s in validation_runs", result.run_id)

