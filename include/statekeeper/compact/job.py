"""The compaction job: move inline state out of bloated `_metadata`, verified; or maintain the warehouse.

    result = (CompactCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(CompactOptions(max_metadata_size=64 << 20))
              .execute())

A run reads the index tables at the newest succeeded cut (and the validation tables computed from it:
a snapshot validation calls broken is never compacted), selects `_metadata` larger than
--max-metadata-size (or with a large inline share, or the --snapshot given) that hold movable inline
state, and compacts each in a Spark task (`tasks.CompactTask` over `apply.compact_snapshot`). Every
snapshot is a `compactions` row. The run's result and log carry the inline-state report per job and
operator. `--maintain-warehouse` instead optimizes and vacuums Statekeeper's own tables.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.compact.options import CompactMode, CompactOptions, CompactOptionsError
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.inputs import PinnedInputs, check_consistent, pin_inputs
from statekeeper.jobs.registry import COMPACT
from statekeeper.jobs.result import JobResult, human_size
from statekeeper.tables.catalog import COMPACTIONS
from statekeeper.tables.vocabulary import CompactionRunStatus, CompactionStatus

SOURCES = ("snapshots", "references", "inline_state", "files")
VALIDATION = ("validation_results", "validation_jobs")
_PROBLEMS_SHOWN = 50
_DONE = (CompactionStatus.COMPACTED.value, CompactionStatus.ALREADY_COMPACTED.value,
         CompactionStatus.RECOVERED.value, CompactionStatus.PLANNED.value)


@dataclass(frozen=True, kw_only=True)
class CompactionResult(JobResult):
    mode: CompactMode
    options: str = "{}"
    source_versions: dict[str, int] = field(default_factory=dict)
    selected: int = 0
    compacted: int = 0             # compacted, already compacted, recovered (or planned, in a dry run)
    failed: int = 0                # failed or refused
    nothing_to_move: int = 0
    metadata_bytes_before: int = 0     # of the snapshots compacted (or planned)
    metadata_bytes_after: int = 0
    files_written: int = 0
    bytes_written: int = 0
    problems: tuple[str, ...] = ()
    report: tuple[dict[str, Any], ...] = ()
    maintenance: str | None = None      # JSON of the warehouse maintenance report

    def summary(self) -> str:
        if self.mode is CompactMode.MAINTAIN_WAREHOUSE:
            lines = [f"compaction run {self.run_id} (maintain warehouse) {self.status} in {self.seconds:.1f}s"]
            if self.maintenance_text:
                lines.append(self.maintenance_text)
        else:
            dry = self.mode is CompactMode.DRY_RUN
            verb, written = ("planned", "would be written") if dry else ("compacted", "written")
            saved = self.metadata_bytes_before - self.metadata_bytes_after
            lines = [f"compaction run {self.run_id} ({self.mode.value}) {self.status} in {self.seconds:.1f}s: "
                     f"{self.compacted}/{self.selected} snapshot(s) {verb}, {self.failed} failed or refused, "
                     f"{self.nothing_to_move} with nothing to move; _metadata {human_size(self.metadata_bytes_before)}"
                     f" -> {human_size(self.metadata_bytes_after)} ({human_size(saved)} less), {self.files_written} "
                     f"file(s) {written} ({human_size(self.bytes_written)})"]
            if self.report:
                lines.append("  inline state per job and operator (all indexed snapshots; movable = what compaction "
                             "can move out):")
                for r in self.report[:20]:
                    name = r.get("operator_uid") or r.get("operator_name") or r.get("operator_id") or "-"
                    lines.append(f"    {r['job_dir']} {name}: {human_size(r['inline_bytes'])} inline in "
                                 f"{r['snapshots']} snapshot(s), {human_size(r['movable_bytes'])} movable, "
                                 f"{r['handle_count']} handle(s)")
        for p in self.problems[:20]:
            lines.append(f"  PROBLEM: {p}")
        if len(self.problems) > 20:
            lines.append(f"  ... {len(self.problems) - 20} more in compaction_runs.problems and compactions")
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    @property
    def maintenance_text(self) -> str | None:
        import json

        if not self.maintenance:
            return None
        return json.loads(self.maintenance).get("summary")


class CompactCheckpoints(StatekeeperJob[CompactionResult]):
    """Builder for one compaction run. Defaults: a new snapshot directory per result, nothing in place."""

    JOB = COMPACT

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self._options = CompactOptions()
        self._inputs: PinnedInputs | None = None
        self._roots: list[str] = []

    def configure(self, options: CompactOptions) -> CompactCheckpoints:
        self._options = options
        return self

    @property
    def options(self) -> CompactOptions:
        return self._options

    def _check_options(self) -> None:
        self._options.check()

    def _prepare(self, ctx: RunContext) -> None:
        from statekeeper.tables import cut
        from statekeeper.tables.errors import CutError
        from statekeeper.tables.reader import TableReader

        if self._options.mode is CompactMode.MAINTAIN_WAREHOUSE:
            return
        self._inputs = pin_inputs(ctx.warehouse, SOURCES, VALIDATION)
        missing = [t for t in VALIDATION if t not in self._inputs.optional]
        if missing:
            raise CutError(f"{ctx.warehouse.uri} has no {', '.join(missing)}: run validate_checkpoints first (a "
                           "snapshot validation calls broken is never compacted)")
        if self._inputs.stale:
            raise CutError(f"the validation tables were computed from an older index run "
                           f"({', '.join(self._inputs.stale)}): run validate_checkpoints, then compact")
        index_cut = cut.latest_cut(ctx.warehouse)
        runs = TableReader(ctx.warehouse).read("index_runs", columns=["run_id", "roots"]).to_pylist()
        self._roots = sorted(next((list(r["roots"]) for r in runs if r["run_id"] == index_cut.run_id), []))
        if self._options.snapshots:
            self._check_explicit(ctx)
        ctx.log.info("%s: warehouse %s, index run %s versions %s, options %s", ctx.label, ctx.warehouse.uri,
                     index_cut.run_id, self._inputs.versions, self._options.to_json())

    def _pinned(self) -> PinnedInputs:
        assert self._inputs is not None, "_prepare pins the inputs"
        return self._inputs

    def _result(self, ctx: RunContext, status: CompactionRunStatus, **values: Any) -> CompactionResult:
        return CompactionResult(run_id=ctx.run_id, status=status.value, started_at=ctx.started,
                                finished_at=datetime.now(timezone.utc), warehouse=ctx.warehouse.uri,
                                mode=self._options.mode, options=self._options.to_json(),
                                source_versions=self._inputs.versions if self._inputs else {}, **values)

    def _failed(self, ctx: RunContext, error: str) -> CompactionResult:
        return self._result(ctx, CompactionRunStatus.FAILED, error=error)

    def _run(self, ctx: RunContext) -> CompactionResult:
        if self._options.mode is CompactMode.MAINTAIN_WAREHOUSE:
            return self._maintain(ctx)
        tables = self._pinned().read(ctx.spark, ctx.engine, ctx.warehouse)
        snaps, inline = ctx.keep(tables["snapshots"]), ctx.keep(tables["inline_state"])
        check_consistent(snaps, tables["references"], self._pinned().versions)
        from statekeeper.tables import delta_log

        optional = self._pinned().read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        # This job's own history (which sources are done), at its newest version: not an input pinned to
        # the index cut.
        done = (ctx.engine.read(ctx.spark, ctx.warehouse, COMPACTIONS.name)
                if delta_log.latest_version(ctx.warehouse, COMPACTIONS.name) is not None else None)
        return self._compact(ctx, snaps, inline, tables["files"], optional["validation_results"], done)

    # -- compaction ------------------------------------------------------------------------------

    def _check_explicit(self, ctx: RunContext) -> None:
        """--snapshot: each must be indexed, parsed, and not broken per validation (a few rows on the driver).
        Checked before the run starts, so a refused request leaves nothing but its error."""
        from pyspark.sql import functions as F

        wanted = list(self._options.snapshots)
        tables = self._pinned().read(ctx.spark, ctx.engine, ctx.warehouse)
        optional = self._pinned().read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        rows = {r["uri"]: r for r in tables["snapshots"].where(F.col("uri").isin(wanted))
                .select("uri", "status", "error").collect()}
        broken = {r["snapshot_uri"] for r in optional["validation_results"]
                  .where((F.col("check") == "snapshot") & F.col("snapshot_uri").isin(wanted) & ~F.col("restorable"))
                  .select("snapshot_uri").collect()}
        for uri in wanted:
            row = rows.get(uri)
            if row is None:
                raise CompactOptionsError(f"--snapshot {uri} is not in the index: is it below an indexed root? Run "
                                          "index_checkpoints (and validate_checkpoints) first")
            if row["status"] != "ok":
                raise CompactOptionsError(f"--snapshot {uri} cannot be compacted: its _metadata is {row['status']} "
                                          f"({(row['error'] or '')[:500]}); nothing was written")
            if uri in broken:
                raise CompactOptionsError(f"--snapshot {uri} does not restore according to validation "
                                          "(validation_results names the missing or short files); nothing was written")

    def _compact(self, ctx: RunContext, snaps: Any, inline: Any, files: Any, results: Any,
                 done: Any | None) -> CompactionResult:
        from pyspark.sql import functions as F

        from statekeeper.compact import select
        from statekeeper.compact.tasks import OUT_SPARK, CompactTask

        opts = self._options
        ctx.beat.phase("reporting inline state")
        report = tuple(select.report(snaps, inline, opts.report_rows))
        ctx.beat.phase("selecting snapshots")
        chosen = ctx.keep(select.candidates(opts, snaps, inline, files, results, done, datetime.now(timezone.utc)))
        selected = int(chosen.count())
        ctx.log.info("%s: %d snapshot(s) selected", ctx.label, selected)
        if selected == 0:
            return self._result(ctx, CompactionRunStatus.SUCCEEDED, report=report)
        finished = ctx.spark.sparkContext.accumulator(0)
        ctx.beat.phase("compacting", lambda: f"{finished.value}/{selected} snapshot(s) done")
        parts = max(1, min(selected, ctx.spark.sparkContext.defaultParallelism * 4))
        task = CompactTask(ctx.storage, opts.placement.value, opts.min_bytes, opts.mode is CompactMode.DRY_RUN,
                           self._roots, finished)
        outcomes = ctx.keep(chosen.repartition(parts, "uri").mapInArrow(task, OUT_SPARK))
        rows = ctx.keep(chosen.join(outcomes, "uri").select(
            F.lit(ctx.run_id).alias("run_id"), "status", F.lit(opts.placement.value).alias("placement"),
            F.col("uri").alias("source_metadata_uri"), F.col("metadata_etag").alias("source_etag"),
            "result_metadata_uri", "backup_uri", "root", "job_dir", "job_id", "checkpoint_id", "snapshot_type",
            "metadata_bytes_before", "metadata_bytes_after", "files_written", "bytes_written", "kept_inline",
            "result_sha256", "problem", "seconds", "finished_at"))
        commit = ctx.engine.write(rows.select(*COMPACTIONS.schema.names), ctx.warehouse, COMPACTIONS, mode="append",
                                  metadata=ctx.commit_metadata())
        by = {r["status"]: r for r in rows.groupBy("status").agg(
            F.count(F.lit(1)).alias("n"), F.sum("metadata_bytes_before").alias("before"),
            F.sum("metadata_bytes_after").alias("after"), F.sum("files_written").alias("files"),
            F.sum("bytes_written").alias("bytes")).collect()}
        good = [by[s] for s in _DONE if s in by]
        bad = sum(int(by[s]["n"]) for s in (CompactionStatus.FAILED.value, CompactionStatus.REFUSED.value) if s in by)
        problems = tuple(f"{r['source_metadata_uri']}: {r['problem']}" for r in
                         rows.where(F.col("status").isin(CompactionStatus.FAILED.value, CompactionStatus.REFUSED.value))
                         .select("source_metadata_uri", "problem").orderBy("source_metadata_uri")
                         .limit(_PROBLEMS_SHOWN).collect())
        nothing = by.get(CompactionStatus.NOTHING_TO_MOVE.value)
        status = CompactionRunStatus.SUCCEEDED if bad == 0 else CompactionRunStatus.ATTENTION
        return self._result(
            ctx, status, selected=selected, compacted=sum(int(r["n"]) for r in good), failed=bad,
            nothing_to_move=int(nothing["n"]) if nothing else 0,
            metadata_bytes_before=sum(int(r["before"] or 0) for r in good),
            metadata_bytes_after=sum(int(r["after"] or 0) for r in good),
            files_written=sum(int(r["files"] or 0) for r in good), bytes_written=sum(int(r["bytes"] or 0) for r in good),
            problems=problems, report=report, table_versions={COMPACTIONS.name: commit.version})

    # -- warehouse maintenance ---------------------------------------------------------------------

    def _maintain(self, ctx: RunContext) -> CompactionResult:
        import json

        from statekeeper.tables.maintenance import TableOutcome, maintain_warehouse

        ctx.beat.phase("maintaining the warehouse tables")
        # A retention shorter than a pinned reader needs raises RetentionFloorError (a configuration
        # error: exit 2) before any table changes.
        report = maintain_warehouse(ctx.warehouse, retention=self._options.warehouse_retention,
                                    dry_run=self._options.warehouse_dry_run, log=ctx.log)
        mapping = report.to_mapping()
        # An absent table is normal (a job never ran here); a concurrent writer's commit is worth a look.
        problems = tuple(f"{t.name}: {t.skipped}" for t in report.tables if t.outcome is TableOutcome.CONFLICT)
        status = CompactionRunStatus.SUCCEEDED if not problems else CompactionRunStatus.ATTENTION
        return self._result(ctx, status, problems=problems,
                            maintenance=json.dumps({**mapping, "summary": report.summary()}, default=str))
