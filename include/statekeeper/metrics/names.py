"""Every metric Statekeeper exports, defined once: name, type, labels, help, where its value comes from.

Standard library only. docs/metrics.md lists the same (a test keeps the two equal), the rules in
monitoring/statekeeper.rules.yml use these names, and the push and the OpenTelemetry export take type and
help from here.

Conventions (Prometheus's): `statekeeper_` prefix, base units in the name (`_seconds`, `_bytes`), counters end
in `_total`. A point in time is exported as the Unix time it happened (`..._timestamp_seconds`), never as an
age: a pushed value stays in the Pushgateway until the next push, so an age would freeze there, and an RPO that
stopped being renewed (the very thing to alert on) would look as fresh as at its last push. The rules compute
ages with `time() - ...` (recording rules `job_dir:statekeeper_..._age:seconds`).

Every series also carries the push's grouping labels: `job` (the Pushgateway job label, default
`statekeeper`), `dag` and `warehouse` (statekeeper.metrics.push).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"


class Scope(StrEnum):
    """Which figures a push carries: the steps of the DAG that pushes them, each read from its own tables, so
    that two DAGs never push the same series (a stale group would otherwise contradict a fresh one)."""

    MAINTENANCE = "maintenance"   # checkpoint_maintenance; and the DR store's own warehouse in checkpoint_dr_copy
    DR_COPY = "dr_copy"           # checkpoint_dr_copy: copies selected from validation, re-verifications
    DR_FOLLOW = "dr_follow"       # checkpoint_dr_follow: a round of copy_to_dr --mode follow


JOB = ("root", "job_dir")              # a job directory of the index (the root's own job: job_dir ".")
VALIDATED = ("root", "job_dir", "kind")  # ... with validation_jobs.kind: job, savepoint or directory
STEP = ("step",)
STEP_STATUS = ("step", "status")

DR = frozenset({Scope.DR_COPY, Scope.DR_FOLLOW})
ALL = frozenset(Scope)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    source: str                  # table.column (what docs/metrics.md names)
    scopes: frozenset[Scope]

    @property
    def unit(self) -> str:
        """The OpenTelemetry unit (UCUM) the name's suffix says."""
        base = self.name.removesuffix("_total")
        return "s" if base.endswith("_seconds") else "By" if base.endswith("_bytes") else "1"

    @property
    def base_name(self) -> str:
        """The name without `_total`: what prometheus-client and OpenTelemetry call a counter."""
        return self.name.removesuffix("_total") if self.kind is Kind.COUNTER else self.name


def _m(name: str, kind: Kind, labels: tuple[str, ...], help: str, source: str,
       scopes: frozenset[Scope]) -> MetricSpec:
    return MetricSpec(name, kind, labels, help, source, frozenset(scopes))


G, C = Kind.GAUGE, Kind.COUNTER
M = frozenset({Scope.MAINTENANCE})

METRICS: tuple[MetricSpec, ...] = (
    # -- per job directory: restorability (the validation run) -------------------------------------------------
    _m("statekeeper_job_newest_checkpoint_id", G, VALIDATED,
       "Id of the job directory's newest retained checkpoint.",
       "validation_jobs.newest_checkpoint_id", M),
    _m("statekeeper_job_newest_checkpoint_timestamp_seconds", G, VALIDATED,
       "When the newest retained checkpoint completed (its _metadata's modification time), Unix seconds.",
       "snapshots.metadata_mtime of validation_jobs.newest_uri", M),
    _m("statekeeper_job_newest_restorable", G, VALIDATED,
       "1 when the newest retained checkpoint restores (every file it references is there, long enough), else 0.",
       "validation_jobs.newest_restorable", M),
    _m("statekeeper_job_latest_restorable_checkpoint_id", G, VALIDATED,
       "Id of the newest checkpoint that restores (absent when none does).",
       "validation_jobs.latest_restorable_checkpoint_id", M),
    _m("statekeeper_job_latest_restorable_timestamp_seconds", G, VALIDATED,
       "When the newest restorable checkpoint completed, Unix seconds (absent when none restores).",
       "snapshots.metadata_mtime of validation_jobs.latest_restorable_uri", M),
    # -- per job directory: storage (the index at its cut, the newest GC run) ------------------------------------
    _m("statekeeper_job_stored_bytes", G, JOB,
       "Bytes of every object under the job directory (its own storage).",
       "files.size, summed per job directory", M),
    _m("statekeeper_job_pinned_bytes", G, JOB,
       "Bytes of the job directory's files that snapshots of other directories reference (pinned by others).",
       "files.size of the distinct references.file_uri whose file_job_dir is this directory and job_dir another", M),
    _m("statekeeper_job_reclaimable_bytes", G, JOB,
       "Bytes the newest GC run's plan would delete (or has not deleted yet) in the job directory.",
       "gc_actions.size where outcome = planned, in the newest gc_runs run's plan", M),
    _m("statekeeper_job_inline_bytes", G, JOB,
       "State bytes stored inline in the job directory's _metadata files.",
       "snapshots.inline_bytes, summed per job directory", M),
    _m("statekeeper_job_ownerless_bytes", G, JOB,
       "Unreferenced bytes of a job directory without any snapshot (ownerless), as the newest GC run found them.",
       "gc_runs.ownerless.bytes of the newest gc_runs row", M),
    # -- per job directory: the DR copy ---------------------------------------------------------------------------
    _m("statekeeper_dr_recovery_point_timestamp_seconds", G, JOB,
       "When the newest checkpoint that has a verified DR copy completed at the source, Unix seconds: the RPO is "
       "time() minus this.",
       "dr_copies.source_completed_at, the newest of the job's verified rows", DR),
    _m("statekeeper_dr_last_verified_copy_timestamp_seconds", G, JOB,
       "When the job's newest verified DR copy (or re-verification) finished, Unix seconds.",
       "dr_copies.finished_at, the newest of the job's verified rows", DR),
    _m("statekeeper_dr_follow_consecutive_refusals", G, JOB,
       "Follow rounds that refused or failed the job's newest checkpoint since its last verified copy.",
       "dr_runs.refused of follow rounds naming the job directory, and dr_copies rows with selected_by = follow "
       "and status = failed, newer than the job's newest verified row (one per round)",
       frozenset({Scope.DR_FOLLOW})),
    # -- per step: the newest run ------------------------------------------------------------------------------
    _m("statekeeper_run_succeeded", G, STEP_STATUS,
       "1 when the step's newest run succeeded, else 0; `status` is that run's status.",
       "<step>_runs.status of the newest row (index_runs, chains_runs, validation_runs, gc_runs, compaction_runs, "
       "maintenance_runs, report_runs, dr_runs)", ALL),
    _m("statekeeper_run_duration_seconds", G, STEP,
       "How long the step's newest run took.",
       "<step>_runs.finished_at - started_at of the newest row", ALL),
    _m("statekeeper_run_finished_timestamp_seconds", G, STEP,
       "When the step's newest run finished, Unix seconds.",
       "<step>_runs.finished_at of the newest row", ALL),
    _m("statekeeper_run_last_success_timestamp_seconds", G, STEP,
       "When the step's newest successful run finished, Unix seconds; 0 when it has runs and none succeeded. "
       "For the index this is the age of what every reader reads.",
       "<step>_runs.finished_at of the newest succeeded row", ALL),
    _m("statekeeper_runs_total", C, STEP_STATUS,
       "Runs of the step by final status.",
       "<step>_runs rows (gc_runs: each run's newest row), counted by status", ALL),
    # -- the newest GC run ---------------------------------------------------------------------------------------
    _m("statekeeper_gc_run_planned_files", G, (), "Files the newest GC run planned to delete.",
       "gc_runs.planned", M),
    _m("statekeeper_gc_run_planned_bytes", G, (), "Bytes the newest GC run planned to delete.",
       "gc_runs.planned_bytes", M),
    _m("statekeeper_gc_run_deleted_files", G, (), "Files the newest GC run deleted.", "gc_runs.deleted", M),
    _m("statekeeper_gc_run_deleted_bytes", G, (), "Bytes the newest GC run deleted.", "gc_runs.deleted_bytes", M),
    _m("statekeeper_gc_run_kept_after_recheck_files", G, (),
       "Planned files the newest GC run kept because they changed or became referenced since the plan.",
       "gc_runs.changed_skipped", M),
    _m("statekeeper_gc_run_failed_files", G, (), "Planned files whose delete failed in the newest GC run.",
       "gc_runs.failed", M),
    _m("statekeeper_gc_deleted_files_total", C, (), "Files deleted by every GC run.",
       "gc_runs.deleted of each run's newest row, summed", M),
    _m("statekeeper_gc_deleted_bytes_total", C, (), "Bytes deleted by every GC run.",
       "gc_runs.deleted_bytes of each run's newest row, summed", M),
    _m("statekeeper_gc_failed_deletes_total", C, (), "Deletes that failed, over every GC run.",
       "gc_runs.failed of each run's newest row, summed", M),
    # -- the newest DR run (step dr_copy or dr_follow) -----------------------------------------------------------
    _m("statekeeper_dr_run_copied_files", G, STEP, "Objects the newest DR run copied.", "dr_runs.files_copied", DR),
    _m("statekeeper_dr_run_copied_bytes", G, STEP, "Bytes the newest DR run copied.", "dr_runs.bytes_copied", DR),
    _m("statekeeper_dr_run_verified_snapshots", G, STEP, "Snapshots the newest DR run copied (or re-verified) "
       "and verified.", "dr_runs.verified", DR),
    _m("statekeeper_dr_run_failed_snapshots", G, STEP, "Snapshots the newest DR run could not copy or refused.",
       "dr_runs.failed", DR),
    _m("statekeeper_dr_run_problems", G, STEP, "Checkpoints (or job directories) the newest DR run refused or "
       "could not copy, each a line of its problems (a follow round's refusals are counted here only).",
       "dr_runs.problems, counted", DR),
    _m("statekeeper_dr_copied_bytes_total", C, STEP, "Bytes copied by every DR run of the step.",
       "dr_runs.bytes_copied, summed", DR),
    _m("statekeeper_dr_snapshots_total", C, STEP_STATUS, "Snapshots the step's DR runs handled, by outcome "
       "(verified, failed).", "dr_copies rows counted by status (step dr_follow: selected_by = follow)", DR),
    # -- the thresholds the rules compare with (statekeeper.metrics.settings) -------------------------------------
    _m("statekeeper_threshold_index_age_seconds", G, (),
       "Alert when the newest successful index run is older than this (the run's setting).",
       "Variable statekeeper_alert_index_age, else the default", M),
    _m("statekeeper_threshold_gc_age_seconds", G, (),
       "Alert when the newest successful GC run is older than this (the run's setting).",
       "Variable statekeeper_alert_gc_age, else the default", M),
    _m("statekeeper_threshold_dr_rpo_seconds", G, (),
       "Alert when a job's DR recovery point is older than this (the run's setting).",
       "Variable statekeeper_alert_dr_rpo, else the default", DR),
    _m("statekeeper_threshold_follow_refusals", G, (),
       "Alert when a follow round refused the same job this many times in a row (the run's setting).",
       "Variable statekeeper_alert_follow_refusals, else the default", frozenset({Scope.DR_FOLLOW})),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}
# The labels every push adds (statekeeper.metrics.push): never a metric's own.
GROUPING_LABELS = ("job", "dag", "warehouse")


def spec(name: str) -> MetricSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no Statekeeper metric named {name!r}") from None


def for_scope(scope: Scope) -> tuple[MetricSpec, ...]:
    return tuple(m for m in METRICS if scope in m.scopes)
