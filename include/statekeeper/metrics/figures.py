"""The figures of statekeeper.metrics.names from the tables' rows. Pure: no IO, no clock.

The big tables (files, snapshots, references, gc_actions, dr_copies) are folded one batch at a time (one data
file: statekeeper.metrics.gather), so memory holds per-directory sums and, for the pinned bytes, the distinct
files other directories reference; never a listing. The audit tables (`*_runs`) and validation_jobs are one row
per run or job and come whole.

Directories are counted per job directory as validation_jobs names them: a root given at a job's own directory
has an index unit per chk-N and one for shared/, all of them its job "." (statekeeper.layout.locate).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statekeeper.layout.locate import location_job_dir
from statekeeper.metrics.names import Scope, spec
from statekeeper.metrics.settings import Thresholds
from statekeeper.tables.vocabulary import (
    ChainsRunStatus,
    CompactionRunStatus,
    DrCopyStatus,
    DrRunStatus,
    DrSelectedBy,
    GcOutcome,
    GcRunStatus,
    IndexRunStatus,
    MaintenanceRunStatus,
    SnapshotType,
    ValidationRunStatus,
)

# dr_runs.mode of a follow round (statekeeper.replicate.options.DrMode.FOLLOW; a job package of its own, so
# spelled here: tests/metrics/test_figures.py keeps the two equal).
FOLLOW_MODE = "follow"
# report_runs.status of a report that was written (statekeeper.report.job.SUCCEEDED).
REPORT_SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class StepRuns:
    """A step's audit table and the statuses that count as success."""

    table: str
    succeeded: frozenset[str]
    events: bool = False          # an event log (gc_runs): a run's state is its newest row


STEPS: dict[str, StepRuns] = {
    "index": StepRuns("index_runs", frozenset({IndexRunStatus.SUCCEEDED})),
    "chains": StepRuns("chains_runs", frozenset({ChainsRunStatus.SUCCEEDED})),
    "validate": StepRuns("validation_runs", frozenset({ValidationRunStatus.OK})),
    "compact": StepRuns("compaction_runs", frozenset({CompactionRunStatus.SUCCEEDED})),
    "gc": StepRuns("gc_runs", frozenset({GcRunStatus.PLANNED, GcRunStatus.COMPLETED}), events=True),
    "maintain_warehouse": StepRuns("maintenance_runs", frozenset({MaintenanceRunStatus.SUCCEEDED})),
    "report": StepRuns("report_runs", frozenset({REPORT_SUCCEEDED})),
    "dr_copy": StepRuns("dr_runs", frozenset({DrRunStatus.SUCCEEDED})),
    "dr_follow": StepRuns("dr_runs", frozenset({DrRunStatus.SUCCEEDED})),
}
MAINTENANCE_STEPS = ("index", "chains", "validate", "compact", "gc", "maintain_warehouse", "report")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


def sample(name: str, value: float | int | bool, **labels: str) -> Sample:
    """One sample of metric `name`, its labels checked against the registry (a typo fails here, not in a rule)."""
    metric = spec(name)
    if set(labels) != set(metric.labels):
        raise ValueError(f"{name} takes labels {metric.labels}, got {sorted(labels)}")
    return Sample(name, tuple((k, str(labels[k])) for k in metric.labels), float(value))


def seconds(value: datetime) -> float:
    return value.timestamp()


def job_key(root: str, job_dir: str) -> tuple[str, str]:
    return root, location_job_dir(job_dir)


# -- restorability -------------------------------------------------------------------------------------------

def wanted_snapshots(jobs: Iterable[Mapping[str, Any]]) -> set[str]:
    """The `_metadata` URIs whose completion time the validation figures need."""
    return {u for j in jobs for u in (j["newest_uri"], j["latest_restorable_uri"]) if u}


def validation_samples(jobs: Iterable[Mapping[str, Any]], completed: Mapping[str, datetime]) -> list[Sample]:
    """Per validation_jobs row: newest checkpoint id and time, restorable, latest restorable id and time.
    `completed`: snapshots.metadata_mtime by URI (of `wanted_snapshots`)."""
    out: list[Sample] = []
    for j in jobs:
        labels = {"root": j["root"], "job_dir": j["job_dir"], "kind": j["kind"]}
        if j["newest_checkpoint_id"] is not None:
            out.append(sample("statekeeper_job_newest_checkpoint_id", j["newest_checkpoint_id"], **labels))
        if j["newest_uri"] in completed:
            out.append(sample("statekeeper_job_newest_checkpoint_timestamp_seconds",
                              seconds(completed[j["newest_uri"]]), **labels))
        if j["newest_restorable"] is not None:
            out.append(sample("statekeeper_job_newest_restorable", bool(j["newest_restorable"]), **labels))
        if j["latest_restorable_checkpoint_id"] is not None:
            out.append(sample("statekeeper_job_latest_restorable_checkpoint_id",
                              j["latest_restorable_checkpoint_id"], **labels))
        if j["latest_restorable_uri"] in completed:
            out.append(sample("statekeeper_job_latest_restorable_timestamp_seconds",
                              seconds(completed[j["latest_restorable_uri"]]), **labels))
    return out


# -- storage per job directory ----------------------------------------------------------------------------------

class StorageFold:
    """Stored, pinned and inline bytes per job directory, and the completion time of wanted snapshots.

    Fold every `references` batch before the first `files` batch: a file's bytes count as pinned when a
    snapshot of another directory references it (the report's definition: distinct files, so a file used by
    many snapshots counts once)."""

    def __init__(self, wanted: set[str] | None = None) -> None:
        self.stored: dict[tuple[str, str], int] = defaultdict(int)
        self.pinned: dict[tuple[str, str], int] = defaultdict(int)
        self.inline: dict[tuple[str, str], int] = defaultdict(int)
        self.completed: dict[str, datetime] = {}
        self._wanted = pa.array(sorted(wanted or ()), pa.string())
        self._pinned_uris: set[str] = set()
        self._files_seen = False

    def add_references(self, batch: pa.Table) -> None:
        """root, job_dir, file_root, file_job_dir, file_uri."""
        if self._files_seen:
            raise RuntimeError("fold every references batch before the files")
        cross = batch.filter(pc.is_valid(batch["file_root"]))
        if not cross.num_rows:
            return
        own = _job_dirs(cross["job_dir"])
        target = _job_dirs(cross["file_job_dir"])
        other = pc.or_(pc.not_equal(cross["file_root"], cross["root"]), pc.not_equal(target, own))
        self._pinned_uris.update(pc.unique(cross.filter(other)["file_uri"]).to_pylist())

    def add_files(self, batch: pa.Table) -> None:
        """uri, root, job_dir, size."""
        self._files_seen = True
        for (root, job_dir), size in _sums(batch, batch["size"]).items():
            self.stored[job_key(root, job_dir)] += size
        if self._pinned_uris:
            used = batch.filter(pc.is_in(batch["uri"], value_set=pa.array(list(self._pinned_uris), pa.string())))
            for (root, job_dir), size in _sums(used, used["size"]).items():
                self.pinned[job_key(root, job_dir)] += size

    def add_snapshots(self, batch: pa.Table) -> None:
        """uri, root, job_dir, metadata_mtime, inline_bytes."""
        for (root, job_dir), size in _sums(batch, pc.fill_null(batch["inline_bytes"], 0)).items():
            self.inline[job_key(root, job_dir)] += size
        if len(self._wanted):
            found = batch.filter(pc.is_in(batch["uri"], value_set=self._wanted))
            self.completed.update(zip(found["uri"].to_pylist(), found["metadata_mtime"].to_pylist()))

    def samples(self) -> list[Sample]:
        out = []
        for key in sorted(self.stored):
            labels = {"root": key[0], "job_dir": key[1]}
            out.append(sample("statekeeper_job_stored_bytes", self.stored[key], **labels))
            out.append(sample("statekeeper_job_pinned_bytes", self.pinned.get(key, 0), **labels))
            out.append(sample("statekeeper_job_inline_bytes", self.inline.get(key, 0), **labels))
        return out


def _job_dirs(column: Any) -> pa.Array:
    values = column.to_pylist()
    return pa.array([None if v is None else location_job_dir(v) for v in values], pa.string())


def _sums(batch: pa.Table, values: Any) -> dict[tuple[str, str], int]:
    if not batch.num_rows:
        return {}
    grouped = pa.table({"root": batch["root"], "job_dir": batch["job_dir"], "v": values}).group_by(
        ["root", "job_dir"]).aggregate([("v", "sum")])
    return {(r["root"], r["job_dir"]): int(r["v_sum"] or 0) for r in grouped.to_pylist()}


def reclaimable_samples(plan: pa.Table, directories: Iterable[tuple[str, str]]) -> list[Sample]:
    """Per job directory: the bytes of the newest GC plan not deleted yet (`plan`: its gc_actions rows, root,
    job_dir, size, outcome). `directories`: the indexed ones, each with a sample (0 when nothing is planned)."""
    planned: dict[tuple[str, str], int] = defaultdict(int)
    rows = plan.filter(pc.equal(plan["outcome"], GcOutcome.PLANNED.value)) if plan.num_rows else plan
    for (root, job_dir), size in _sums(rows, rows["size"]).items() if rows.num_rows else ():
        planned[job_key(root, job_dir)] += size
    keys = sorted(set(directories) | set(planned))
    return [sample("statekeeper_job_reclaimable_bytes", planned.get(k, 0), root=k[0], job_dir=k[1]) for k in keys]


def ownerless_samples(run: Mapping[str, Any] | None) -> list[Sample]:
    """Per ownerless job directory of the newest GC run (its `ownerless` column)."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for d in (run or {}).get("ownerless") or ():
        out[job_key(d["root"], d["job_dir"])] += int(d["bytes"] or 0)
    return [sample("statekeeper_job_ownerless_bytes", v, root=k[0], job_dir=k[1]) for k, v in sorted(out.items())]


# -- runs -------------------------------------------------------------------------------------------------------

def run_states(step: str, rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The step's runs, one row each (an event log's newest row per run), oldest first. dr_runs holds both DR
    steps: a follow round (mode follow) is dr_follow's, any other dr_copy's."""
    rows = list(rows)
    if step in ("dr_copy", "dr_follow"):
        rows = [r for r in rows if (r["mode"] == FOLLOW_MODE) == (step == "dr_follow")]
    if STEPS[step].events:
        newest: dict[str, Mapping[str, Any]] = {}
        for r in rows:
            if r["run_id"] not in newest or r["finished_at"] >= newest[r["run_id"]]["finished_at"]:
                newest[r["run_id"]] = r
        rows = list(newest.values())
    return sorted(rows, key=lambda r: r["finished_at"])


def run_samples(step: str, runs: list[Mapping[str, Any]]) -> list[Sample]:
    """Status, duration and time of the step's newest run, its last success, and its runs by status (`runs`:
    run_states)."""
    if not runs:
        return []
    succeeded = STEPS[step].succeeded
    newest = runs[-1]
    good = [r for r in runs if r["status"] in succeeded]
    out = [
        sample("statekeeper_run_succeeded", newest["status"] in succeeded, step=step, status=newest["status"]),
        sample("statekeeper_run_duration_seconds", (newest["finished_at"] - newest["started_at"]).total_seconds(),
               step=step),
        sample("statekeeper_run_finished_timestamp_seconds", seconds(newest["finished_at"]), step=step),
        sample("statekeeper_run_last_success_timestamp_seconds", seconds(good[-1]["finished_at"]) if good else 0,
               step=step),
    ]
    counts: dict[str, int] = defaultdict(int)
    for r in runs:
        counts[r["status"]] += 1
    out += [sample("statekeeper_runs_total", n, step=step, status=status) for status, n in sorted(counts.items())]
    return out


def gc_samples(runs: list[Mapping[str, Any]]) -> list[Sample]:
    """The newest GC run's counts and the totals over every run (`runs`: run_states("gc", ...))."""
    if not runs:
        return []
    newest = runs[-1]
    return [
        sample("statekeeper_gc_run_planned_files", newest["planned"]),
        sample("statekeeper_gc_run_planned_bytes", newest["planned_bytes"]),
        sample("statekeeper_gc_run_deleted_files", newest["deleted"]),
        sample("statekeeper_gc_run_deleted_bytes", newest["deleted_bytes"]),
        sample("statekeeper_gc_run_kept_after_recheck_files", newest["changed_skipped"]),
        sample("statekeeper_gc_run_failed_files", newest["failed"]),
        sample("statekeeper_gc_deleted_files_total", sum(r["deleted"] for r in runs)),
        sample("statekeeper_gc_deleted_bytes_total", sum(r["deleted_bytes"] for r in runs)),
        sample("statekeeper_gc_failed_deletes_total", sum(r["failed"] for r in runs)),
    ]


def dr_run_samples(step: str, runs: list[Mapping[str, Any]]) -> list[Sample]:
    """The newest DR run of the step and the bytes of all of them (`runs`: run_states(step, dr_runs rows))."""
    if not runs:
        return []
    newest = runs[-1]
    return [
        sample("statekeeper_dr_run_copied_files", newest["files_copied"], step=step),
        sample("statekeeper_dr_run_copied_bytes", newest["bytes_copied"], step=step),
        sample("statekeeper_dr_run_verified_snapshots", newest["verified"], step=step),
        sample("statekeeper_dr_run_failed_snapshots", newest["failed"], step=step),
        sample("statekeeper_dr_run_problems", len(newest["problems"] or ()), step=step),
        sample("statekeeper_dr_copied_bytes_total", sum(r["bytes_copied"] for r in runs), step=step),
    ]


# -- DR copies per job ------------------------------------------------------------------------------------------

class DrCopiesFold:
    """Per job: the newest verified copy of a checkpoint (recovery point, finish), the follow refusals since, and
    the step's copies by outcome. Savepoint copies count among the outcomes only: a savepoint is no recovery
    point that ages. Batches: dr_copies rows (source_root, job_dir, snapshot_type, status, selected_by,
    finished_at, source_completed_at)."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.recovery_point: dict[tuple[str, str], datetime] = {}
        self.verified_at: dict[tuple[str, str], datetime] = {}
        # per job, the follow rounds (run ids) that refused or failed its newest checkpoint, and when
        self.refused_at: dict[tuple[str, str], dict[str, datetime]] = defaultdict(dict)
        self.outcomes: dict[str, int] = defaultdict(int)

    def add_follow_runs(self, runs: Iterable[Mapping[str, Any]]) -> None:
        """Follow rounds (dr_runs rows of mode follow): a refused checkpoint leaves no dr_copies row; the round
        records it in `dr_runs.refused` (rows written before that column existed count no refusal)."""
        for run in runs:
            for refusal in run.get("refused") or ():
                _keep_round(self.refused_at[job_key(refusal["root"], refusal["job_dir"])], run["run_id"],
                            run["finished_at"])

    def add(self, batch: pa.Table) -> None:
        for r in batch.to_pylist():
            key = job_key(r["source_root"], r["job_dir"])
            follow = r["selected_by"] == DrSelectedBy.FOLLOW.value
            if follow == (self.step == "dr_follow"):
                self.outcomes[r["status"]] += 1
            if r["snapshot_type"] == SnapshotType.SAVEPOINT.value:
                continue
            if r["status"] == DrCopyStatus.VERIFIED.value:
                _keep_max(self.verified_at, key, r["finished_at"])
                if r["source_completed_at"] is not None:
                    _keep_max(self.recovery_point, key, r["source_completed_at"])
            elif follow:
                _keep_round(self.refused_at[key], r["run_id"], r["finished_at"])

    def samples(self) -> list[Sample]:
        out = []
        for key in sorted(set(self.verified_at) | set(self.refused_at)):
            labels = {"root": key[0], "job_dir": key[1]}
            if key in self.recovery_point:
                out.append(sample("statekeeper_dr_recovery_point_timestamp_seconds",
                                  seconds(self.recovery_point[key]), **labels))
            if key in self.verified_at:
                out.append(sample("statekeeper_dr_last_verified_copy_timestamp_seconds",
                                  seconds(self.verified_at[key]), **labels))
            if self.step == "dr_follow":
                since = self.verified_at.get(key)
                refusals = sum(1 for t in self.refused_at.get(key, {}).values() if since is None or t > since)
                out.append(sample("statekeeper_dr_follow_consecutive_refusals", refusals, **labels))
        out += [sample("statekeeper_dr_snapshots_total", n, step=self.step, status=status)
                for status, n in sorted(self.outcomes.items())]
        return out


def _keep_round(rounds: dict[str, datetime], run_id: str, at: datetime) -> None:
    """One round counts once, whether its refusal is a line in dr_runs.problems or a failed dr_copies row."""
    if run_id not in rounds or at > rounds[run_id]:
        rounds[run_id] = at


def _keep_max(into: dict[tuple[str, str], datetime], key: tuple[str, str], value: datetime) -> None:
    if key not in into or value > into[key]:
        into[key] = value


# -- thresholds -------------------------------------------------------------------------------------------------

def threshold_samples(scope: Scope, thresholds: Thresholds) -> list[Sample]:
    """The thresholds the scope's rules use, as the run's settings chose them."""
    if scope is Scope.MAINTENANCE:
        return [sample("statekeeper_threshold_index_age_seconds", thresholds.index_age.total_seconds()),
                sample("statekeeper_threshold_gc_age_seconds", thresholds.gc_age.total_seconds())]
    out = [sample("statekeeper_threshold_dr_rpo_seconds", thresholds.dr_rpo.total_seconds())]
    if scope is Scope.DR_FOLLOW:
        out.append(sample("statekeeper_threshold_follow_refusals", thresholds.follow_refusals))
    return out
