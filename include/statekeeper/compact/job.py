"""The compaction job: move inline state out of bloated `_metadata`, verified.

    result = (CompactCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(CompactOptions(max_metadata_size=64 << 20))
              .execute())

A run reads the index tables at the newest succeeded cut (and the validation tables computed from it:
a snapshot validation calls broken is never compacted), selects `_metadata` larger than
--max-metadata-size (or with a large inline share, or the --snapshot given) that hold movable inline
state, and compacts each in a Spark task (`tasks.CompactTask` over `apply.compact_snapshot`). Every
snapshot is a `compactions` row. The run's result and log carry the inline-state report per job and
operator. (Statekeeper's own tables are maintained by a job of their own: statekeeper.maintain.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper.compact.options import CompactMode, CompactOptions, CompactOptionsError
from statekeeper.jobs import selection
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.inputs import VALIDATION_TABLES
from statekeeper.jobs.result import JobResult
from statekeeper.registry import COMPACT
from statekeeper.units import human_size
from statekeeper.tables.catalog import COMPACTIONS
from statekeeper.tables.vocabulary import CompactionRunStatus, CompactionStatus

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

    def summary(self) -> str:
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
        lines += self._closing_lines(self.problems, "compaction_runs.problems and compactions")
        return "\n".join(lines)

    def audit_values(self) -> dict[str, Any]:
        # Legacy column: maintenance runs are maintenance_runs rows now, and write nothing here.
        return {"maintenance": None}


class CompactCheckpoints(StatekeeperJob[CompactionResult, CompactOptions]):
    """Builder for one compaction run. Defaults: a new snapshot directory per result, nothing in place."""

    JOB = COMPACT
    SOURCES = ("snapshots", "references", "inline_state", "files")
    OPTIONAL_SOURCES = VALIDATION_TABLES

    def _prepare(self, ctx: RunContext) -> None:
        self.inputs.require_validation(ctx.warehouse, because="a snapshot validation calls broken is never compacted",
                                       then="compact")
        if self.options.snapshots:
            self._check_explicit(ctx)

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        return {"mode": self.options.mode, "options": self.options.to_json()}

    def _run(self, ctx: RunContext) -> CompactionResult:
        from statekeeper.tables import delta_log

        tables = self._read_cut(ctx, keep=("snapshots", "inline_state"))
        optional = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        # This job's own history (which sources are done), at its newest version: not an input pinned to
        # the index cut.
        done = (ctx.engine.read(ctx.spark, ctx.warehouse, COMPACTIONS.name)
                if delta_log.latest_version(ctx.warehouse, COMPACTIONS.name) is not None else None)
        return self._compact(ctx, tables["snapshots"], tables["inline_state"], tables["files"],
                             optional["validation_results"], done)

    # -- compaction ------------------------------------------------------------------------------

    def _check_explicit(self, ctx: RunContext) -> None:
        """--snapshot: each must be indexed, parsed, and not broken per validation (a few rows on the driver).
        Checked before the run starts, so a refused request leaves nothing but its error."""
        tables = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse)
        optional = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)
        for snapshot in selection.explicit_snapshots(tables["snapshots"], optional["validation_results"],
                                                     list(self.options.snapshots)):
            # Only what validation calls broken is refused: a snapshot it has not looked at yet may be
            # compacted (the result is verified against it handle by handle before it is installed).
            if snapshot.verdict is not selection.Verdict.NOT_VALIDATED:
                refusal = snapshot.refusal("compacted", error_chars=500)
                if refusal is not None:
                    raise CompactOptionsError(refusal)

    def _compact(self, ctx: RunContext, snaps: Any, inline: Any, files: Any, results: Any,
                 done: Any | None) -> CompactionResult:
        from pyspark.sql import functions as F

        from statekeeper.compact import select
        from statekeeper.compact.tasks import OUT_SPARK, CompactTask

        opts = self.options
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
                           self.inputs.roots, finished)
        outcomes = ctx.keep(chosen.repartition(parts, "uri").mapInArrow(task, OUT_SPARK))
        rows = ctx.keep(chosen.join(outcomes, "uri").select(
            F.lit(ctx.run_id).alias("run_id"), "status", F.lit(opts.placement.value).alias("placement"),
            F.col("uri").alias("source_metadata_uri"), F.col("metadata_etag").alias("source_etag"),
            "result_metadata_uri", "backup_uri", "root", "job_dir", "job_id", "checkpoint_id", "snapshot_type",
            "metadata_bytes_before", "metadata_bytes_after", "files_written", "bytes_written", "kept_inline",
            "result_sha256", "problem", "seconds", "finished_at"))
        commit = ctx.engine.write(rows.select(*COMPACTIONS.schema.names), ctx.warehouse, COMPACTIONS, mode="append",
                                  metadata=ctx.commit_metadata())
        counts = _counts(rows)
        status = CompactionRunStatus.SUCCEEDED if counts["failed"] == 0 else CompactionRunStatus.ATTENTION
        return self._result(ctx, status, selected=selected, report=report,
                            table_versions={COMPACTIONS.name: commit.version}, **counts)


def _counts(rows: Any) -> dict[str, Any]:
    """The Result's counts of a run's compactions rows: done (or planned) with their sizes, failed or
    refused with their problems, nothing to move."""
    from pyspark.sql import functions as F

    by = {r["status"]: r for r in rows.groupBy("status").agg(
        F.count(F.lit(1)).alias("n"), F.sum("metadata_bytes_before").alias("before"),
        F.sum("metadata_bytes_after").alias("after"), F.sum("files_written").alias("files"),
        F.sum("bytes_written").alias("bytes")).collect()}
    good = [by[s] for s in _DONE if s in by]
    refused = (CompactionStatus.FAILED.value, CompactionStatus.REFUSED.value)
    problems = tuple(f"{r['source_metadata_uri']}: {r['problem']}" for r in
                     rows.where(F.col("status").isin(*refused))
                     .select("source_metadata_uri", "problem").orderBy("source_metadata_uri")
                     .limit(_PROBLEMS_SHOWN).collect())
    nothing = by.get(CompactionStatus.NOTHING_TO_MOVE.value)
    return {"compacted": sum(int(r["n"]) for r in good), "failed": sum(int(by[s]["n"]) for s in refused if s in by),
            "nothing_to_move": int(nothing["n"]) if nothing else 0,
            "metadata_bytes_before": sum(int(r["before"] or 0) for r in good),
            "metadata_bytes_after": sum(int(r["after"] or 0) for r in good),
            "files_written": sum(int(r["files"] or 0) for r in good),
            "bytes_written": sum(int(r["bytes"] or 0) for r in good), "problems": problems}
