"""The warehouse maintenance job: compact, vacuum and checkpoint Statekeeper's own Delta tables.

    result = (MaintainWarehouse(spark)
              .warehouse("s3://bucket/statekeeper")
              .configure(MaintainOptions(retention=timedelta(days=7)))
              .execute())

A run reads no index cut: it keeps every version the other jobs pin (the retention floor of
`statekeeper.tables.maintenance`), maintains every table of the warehouse one after the other
(absent ones skipped) and appends a `maintenance_runs` row saying what each table's maintenance did.
A retention shorter than a pinned reader needs is refused before any table changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.result import JobResult
from statekeeper.maintain.options import MaintainOptions
from statekeeper.registry import MAINTAIN
from statekeeper.tables.maintenance import MaintenanceReport, TableMaintenance, TableOutcome
from statekeeper.tables.vocabulary import MaintenanceMode, MaintenanceRunStatus

# The report's totals a run records as columns of its own (the per-table ones are in `tables`).
_TOTALS = ("files_before", "files_after", "files_compacted", "files_added", "files_vacuumed", "bytes_vacuumed",
           "stored_files_before", "stored_files_after")


@dataclass(frozen=True, kw_only=True)
class MaintenanceResult(JobResult):
    mode: MaintenanceMode
    options: str = "{}"
    retention_seconds: float | None = None      # as vacuum applied it (whole hours)
    files_before: int = 0                       # live data files of the tables present
    files_after: int = 0
    files_compacted: int = 0                    # (dry run: would be)
    files_added: int = 0
    files_vacuumed: int = 0
    bytes_vacuumed: int = 0
    stored_files_before: int = 0                # data files on storage
    stored_files_after: int = 0
    tables: tuple[TableMaintenance, ...] = ()
    problems: tuple[str, ...] = ()              # tables a concurrent writer kept from being maintained

    @classmethod
    def values_of(cls, report: MaintenanceReport) -> dict[str, Any]:
        """The fields a finished maintenance report fills."""
        return {"retention_seconds": report.retention.total_seconds(), "tables": report.tables,
                "table_versions": {t.name: t.version_after for t in report.tables if t.version_after is not None},
                **{name: getattr(report, name) for name in _TOTALS}}

    def summary(self) -> str:
        lines = [f"maintenance run {self.run_id} ({self.mode.value}) {self.status} in {self.seconds:.1f}s"]
        if self.retention_seconds is not None:
            report = MaintenanceReport(self.warehouse, timedelta(seconds=self.retention_seconds),
                                       self.mode is MaintenanceMode.DRY_RUN, self.started_at, self.finished_at,
                                       self.tables)
            lines.append(report.summary())
        lines += self._closing_lines(self.problems, "maintenance_runs.problems")
        return "\n".join(lines)

    def audit_values(self) -> dict[str, Any]:
        return {"tables": [t.audit_row() for t in self.tables]}


class MaintainWarehouse(StatekeeperJob[MaintenanceResult, MaintainOptions]):
    """Builder for one maintenance run. Defaults: a 7-day retention, for real (not a dry run)."""

    JOB = MAINTAIN

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        return {"mode": self.options.mode, "options": self.options.to_json()}

    def _run(self, ctx: RunContext) -> MaintenanceResult:
        from statekeeper.tables.maintenance import maintain_warehouse

        ctx.beat.phase("maintaining the warehouse tables")
        # A retention shorter than a pinned reader needs raises RetentionFloorError (a configuration
        # error: exit 2) before any table changes.
        report = maintain_warehouse(ctx.warehouse, retention=self.options.retention, dry_run=self.options.dry_run,
                                    log=ctx.log)
        # An absent table is normal (a job never ran here); a concurrent writer's commit is worth a look.
        problems = tuple(f"{t.name}: {t.skipped}" for t in report.tables if t.outcome is TableOutcome.CONFLICT)
        status = MaintenanceRunStatus.SUCCEEDED if not problems else MaintenanceRunStatus.ATTENTION
        return self._result(ctx, status, problems=problems, **MaintenanceResult.values_of(report))
