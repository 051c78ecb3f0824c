"""The report job: the warehouse's tables -> one self-contained HTML page per run.

    result = (BuildReport(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(ReportOptions(out="/tmp/report"))   # optional: also a local copy of the page
              .execute())
    result.report_uri                        # <warehouse>/_reports/runs/<run>/index.html

Reads the index tables at the newest succeeded cut and the derived tables (chains, validation, GC,
DR, compaction) at their latest versions, aggregates in Spark (statekeeper.report.gather), renders
(statekeeper.report.render) and publishes through statekeeper.report.store. It writes nothing but
the report's files and its `report_runs` row. Steps that have not run yet are named on the page
instead of failing the report: the report of a store whose validation failed is the one people need.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.inputs import PinnedInputs
from statekeeper.jobs.result import JobResult
from statekeeper.jobs.side_by_side import run_side_by_side
from statekeeper.registry import REPORT
from statekeeper.report.gather import Gatherer, job_frames
from statekeeper.report.idle import idle_job_dirs
from statekeeper.report.model import ReportData, TrendPoint
from statekeeper.report.options import ReportOptions
from statekeeper.report.store import ReportStore, data_json
from statekeeper.units import human_size

SUCCEEDED = "succeeded"
FAILED = "failed"
AUDIT_SOURCES = ("gc_runs", "dr_runs", "compaction_runs", "report_runs")


@dataclass(frozen=True, kw_only=True)
class ReportResult(JobResult):
    source_versions: dict[str, int]
    index_run_id: str | None = None
    report_uri: str | None = None
    local_copy: str | None = None
    directories: int = 0
    files: int = 0
    bytes_total: int = 0
    bytes_pinned: int = 0
    bytes_reclaimable: int = 0
    bytes_inline: int = 0
    jobs: int = 0
    jobs_unrestorable: int = 0
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        lines = [f"report run {self.run_id} {self.status} in {self.seconds:.1f}s: {self.directories} directories, "
                 f"{self.files} objects, {human_size(self.bytes_total)} stored ({human_size(self.bytes_pinned)} pinned "
                 f"by other jobs, {human_size(self.bytes_reclaimable)} reclaimable, {human_size(self.bytes_inline)} "
                 f"inline in _metadata); {self.jobs_unrestorable} of {self.jobs} validated job(s) not restorable"]
        if self.report_uri:
            lines.append(f"  report: {self.report_uri}")
        if self.local_copy:
            lines.append(f"  local copy: {self.local_copy}")
        lines.extend(f"  note: {n}" for n in self.notes)
        lines += self._closing_lines()
        return "\n".join(lines)


class BuildReport(StatekeeperJob[ReportResult, ReportOptions]):
    """Builder for one report run."""

    JOB = REPORT
    SOURCES = ("files", "snapshots", "references")
    OPTIONAL_SOURCES = ("inline_state", "validation_jobs", "validation_results", "gc_actions", "dr_copies", "compactions")

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        return {"index_run_id": self.inputs.cut.run_id}

    def _run(self, ctx: RunContext) -> ReportResult:
        from statekeeper.report import charts
        from statekeeper.report.render import render

        clock = time.monotonic()
        threading.Thread(target=charts.prepare, name="statekeeper-charts", daemon=True).start()
        data = self._gather(ctx)
        ctx.log.info("%s: gathered (%.1fs)", ctx.label, time.monotonic() - clock)

        ctx.deferred.settle()   # the cut check: no page of a torn cut is published
        ctx.beat.phase("rendering")
        page = render(data).encode("utf-8")
        mapping = data.to_mapping()
        ref = ReportStore(ctx.warehouse).publish(ctx.run_id, page, mapping, data.generated_at)
        local = self._write_local(page, mapping) if self.options.out else None
        ctx.log.info("%s: %s written (%s, %.1fs)", ctx.label, ref.page_uri, human_size(len(page)),
                     time.monotonic() - clock)
        totals = data.totals
        return self._result(
            ctx, SUCCEEDED, report_uri=ref.page_uri, local_copy=local, directories=totals.directories,
            files=totals.files, bytes_total=totals.total_bytes, bytes_pinned=totals.pinned_bytes,
            bytes_reclaimable=totals.reclaimable_bytes, bytes_inline=totals.inline_bytes, jobs=data.jobs,
            jobs_unrestorable=data.jobs_unrestorable, notes=data.notes)

    def _gather(self, ctx: RunContext) -> ReportData:
        """Every view of the page, aggregated in Spark over the pinned tables (statekeeper.report.gather)."""
        from statekeeper.tables.reader import TableReader

        inputs, limits = self.inputs, self.options.limits
        # Checked like every reader's cut: a page over a torn cut would show totals no storage state had.
        frames = job_frames({**self._read_cut(ctx),
                             **inputs.read(ctx.spark, ctx.engine, ctx.warehouse, optional=True)})
        reader = TableReader(ctx.warehouse)
        versions = {**inputs.versions, **inputs.optional}
        for name in AUDIT_SOURCES:
            if (v := reader.version(name)) is not None and name != "report_runs":
                versions[name] = v
        g = Gatherer(frames, reader, limits, keep=ctx.keep)

        ctx.beat.phase("storage per directory")
        g.directories()   # kept: every part below reads it (and cross_uses), none builds it again
        now = datetime.now(timezone.utc)
        idle_before = now - self.options.inactive_after
        parts = run_side_by_side(ctx.spark, ctx.beat, {
            "storage per directory": g.storage,
            "lineage": g.lineage,
            "health": g.health,
            "_metadata and inline state": g.metadata,
            "gc, dr, compaction": lambda: (g.gc(), g.compaction(), g.dr(), g.dr_verified_jobs()),
            "idle job directories": lambda: idle_job_dirs(g, idle_before, limits.idle_jobs),
        })
        totals, storage = parts["storage per directory"]
        nodes, edges, edge_count, edge_bytes = parts["lineage"]
        health, jobs, unrestorable, uncovered, validation_run = parts["health"]
        series, operators = parts["_metadata and inline state"]
        gc, compaction, dr, dr_verified = parts["gc, dr, compaction"]
        idle, idle_count, idle_bytes = parts["idle job directories"]
        current = TrendPoint(ctx.run_id, now, totals.total_bytes, totals.pinned_bytes, totals.reclaimable_bytes,
                             totals.inline_bytes, unrestorable)
        return ReportData(
            run_id=ctx.run_id, generated_at=now, warehouse=ctx.warehouse.uri, index_run_id=inputs.cut.run_id,
            versions=versions, totals=totals, storage=storage, lineage_nodes=nodes, lineage_edges=edges,
            lineage_edge_count=edge_count, lineage_edge_bytes=edge_bytes, health=health, jobs=jobs,
            jobs_unrestorable=unrestorable, jobs_not_validated=uncovered, validation_run_id=validation_run,
            metadata_series=series, operators=operators, gc=gc, compaction=compaction, dr=dr,
            dr_verified_jobs=dr_verified, trend=g.trend(current), notes=self._notes(inputs, frames),
            limits=limits.__dict__.copy(), airflow_run_id=self._airflow_run_id, idle_before=idle_before,
            idle_jobs=idle, idle_count=idle_count, idle_bytes=idle_bytes)

    @staticmethod
    def _notes(inputs: PinnedInputs, frames: dict[str, Any]) -> tuple[str, ...]:
        notes = [f"{s}: computed from another index run than the one shown, so it may miss the newest snapshots "
                 "(run chains/validate after the index)" for s in inputs.stale]
        if "validation_jobs" not in frames:
            notes.append("no validation run yet: restorability is unknown (run the validate task)")
        if "gc_actions" not in frames:
            notes.append("no GC run yet: nothing is counted as reclaimable")
        return tuple(notes)

    def _write_local(self, page: bytes, mapping: dict[str, Any]) -> str:
        out = self.options.out
        assert out is not None
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "index.html")
        with open(path, "wb") as f:
            f.write(page)
        with open(os.path.join(out, "report.json"), "wb") as f:
            f.write(data_json(mapping))
        return path
