"""What a report shows, as plain values: gathered from the tables (statekeeper.report.gather), then
rendered (statekeeper.report.render). Every list is already cut to what a page can show (top N with
totals for the rest), so rendering never depends on the size of the store.

Storage categories of a job directory (bytes of the objects the index listed there):
    pinned       files other directories' snapshots reference (they keep them alive whatever this job does)
    reclaimable  files the newest GC plan would delete and that were not deleted yet
    own          the rest: what this directory's own snapshots (and unplanned leftovers) hold
`inline` is the state stored inside its `_metadata` objects (part of `own`), shown beside them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from statekeeper.jobs.gc_runs import ClaimableTail, ForstJob, OwnerlessDir
from statekeeper.jobs.idle import IdleJobDir


@dataclass(frozen=True)
class Source:
    """Where a number comes from: a table at a version and the filter/aggregate applied."""
    table: str
    version: int | None
    where: str

    def text(self) -> str:
        at = f" v{self.version}" if self.version is not None else ""
        return f"{self.table}{at}: {self.where}"


@dataclass(frozen=True)
class JobStorage:
    root: str
    job_dir: str
    job_id: str | None
    files: int
    total_bytes: int
    pinned_files: int
    pinned_bytes: int
    reclaimable_files: int
    reclaimable_bytes: int
    snapshots: int
    metadata_bytes: int
    inline_bytes: int

    @property
    def own_bytes(self) -> int:
        return max(0, self.total_bytes - self.pinned_bytes - self.reclaimable_bytes)


@dataclass(frozen=True)
class StorageTotals:
    directories: int
    files: int
    total_bytes: int
    pinned_bytes: int
    reclaimable_bytes: int
    inline_bytes: int
    snapshots: int

    @property
    def own_bytes(self) -> int:
        return max(0, self.total_bytes - self.pinned_bytes - self.reclaimable_bytes)


@dataclass(frozen=True)
class LineageEdge:
    """Snapshots in (root, job_dir) use `files` distinct files (`bytes`) of (target_root, target_job_dir)."""
    root: str
    job_dir: str
    target_root: str
    target_job_dir: str
    files: int
    bytes: int


@dataclass(frozen=True)
class LineageNode:
    root: str
    job_dir: str
    job_id: str | None
    kind: str                       # job | savepoint | directory
    restorable: bool | None         # the newest checkpoint restores (None: not validated)
    total_bytes: int

    @property
    def key(self) -> str:
        return f"{self.root}/{self.job_dir}"


@dataclass(frozen=True)
class DrCopyRef:
    target_metadata_uri: str | None
    checkpoint_id: int | None
    finished_at: datetime
    # The recovery point (dr_copies.source_completed_at / published_at; None on rows older than those columns):
    source_completed_at: datetime | None = None   # when the newest copied checkpoint completed at the source
    rpo_seconds: float | None = None              # its age when the report ran: what a failover now would lose
    lags: tuple[float, ...] = ()                  # published - completed, seconds, of the last copies, oldest first


@dataclass(frozen=True)
class JobHealth:
    root: str
    job_dir: str
    job_id: str | None
    kind: str
    status: str                     # validation_jobs.status
    snapshots: int
    newest_uri: str | None
    newest_checkpoint_id: int | None
    newest_restorable: bool | None
    latest_restorable_uri: str | None
    latest_restorable_checkpoint_id: int | None
    failing_checks: tuple[str, ...] = ()
    last_dr_copy: DrCopyRef | None = None


@dataclass(frozen=True)
class MetadataPoint:
    root: str
    job_dir: str
    checkpoint_id: int | None
    metadata_bytes: int
    inline_bytes: int


@dataclass(frozen=True)
class OperatorInline:
    root: str
    job_dir: str
    operator: str                   # name, else uid, else id
    operator_id: str | None
    snapshots: int
    inline_bytes: int
    max_snapshot_inline_bytes: int


@dataclass(frozen=True)
class OutcomeCount:
    reason: str
    outcome: str
    files: int
    bytes: int


@dataclass(frozen=True)
class GcSummary:
    run_id: str
    plan_run_id: str
    status: str
    mode: str
    finished_at: datetime
    planned: int
    planned_bytes: int
    deleted: int
    deleted_bytes: int
    already_gone: int
    changed_skipped: int
    failed: int
    blocked: tuple[str, ...]
    outcomes: tuple[OutcomeCount, ...]
    ownerless: tuple[OwnerlessDir, ...] = ()
    forst: tuple[ForstJob, ...] = ()
    claimable: tuple[ClaimableTail, ...] = ()


@dataclass(frozen=True)
class CompactionSummary:
    run_id: str
    status: str
    mode: str
    finished_at: datetime
    selected: int
    compacted: int
    failed: int
    metadata_bytes_before: int
    metadata_bytes_after: int
    problems: tuple[str, ...]
    statuses: dict[str, int]


@dataclass(frozen=True)
class DrSummary:
    run_id: str
    status: str
    mode: str
    finished_at: datetime
    snapshots: int
    verified: int
    failed: int
    bytes_copied: int
    problems: tuple[str, ...]


@dataclass(frozen=True)
class TrendPoint:
    run_id: str
    at: datetime
    total_bytes: int
    pinned_bytes: int
    reclaimable_bytes: int
    inline_bytes: int
    jobs_unrestorable: int


@dataclass(frozen=True)
class ReportData:
    run_id: str
    generated_at: datetime
    warehouse: str
    index_run_id: str
    versions: dict[str, int]                     # every table read, at the version read
    totals: StorageTotals
    storage: tuple[JobStorage, ...]              # the largest directories, by total bytes
    lineage_nodes: tuple[LineageNode, ...]
    lineage_edges: tuple[LineageEdge, ...]       # the heaviest cross-directory edges
    lineage_edge_count: int                      # all cross-directory edges
    lineage_edge_bytes: int
    health: tuple[JobHealth, ...]                # unrestorable first, then by storage
    jobs: int                                    # validated job/savepoint directories
    jobs_unrestorable: int
    jobs_not_validated: int
    validation_run_id: str | None
    metadata_series: tuple[MetadataPoint, ...]   # the jobs with the largest `_metadata`, over checkpoints
    operators: tuple[OperatorInline, ...]        # top operators by inline bytes
    gc: GcSummary | None
    compaction: CompactionSummary | None
    dr: DrSummary | None
    dr_verified_jobs: int
    trend: tuple[TrendPoint, ...]                # oldest first, this run last
    notes: tuple[str, ...] = ()                  # caveats the reader must see (stale tables, missing steps)
    airflow_run_id: str | None = None            # the caller's run (the DAG run that wrote it)
    limits: dict[str, int] = field(default_factory=dict)
    # Job directories with no checkpoint since `idle_before` (statekeeper.inspect.idle): the largest, all of
    # them counted, and their bytes.
    idle_before: datetime | None = None
    idle_jobs: tuple[IdleJobDir, ...] = ()
    idle_count: int = 0
    idle_bytes: int = 0

    def source(self, table: str, where: str) -> Source:
        return Source(table, self.versions.get(table), where)

    def to_mapping(self) -> dict[str, Any]:
        """JSON-ready (report.json)."""
        return _json(self)


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("own_bytes",):
            if hasattr(type(value), name):
                out[name] = getattr(value, name)
        return out
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value
