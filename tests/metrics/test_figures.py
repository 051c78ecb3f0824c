"""The figures a push carries, read back from a small warehouse whose every row is known (tests/metrics/support)."""
from __future__ import annotations

import pytest

from statekeeper.metrics import figures
from statekeeper.metrics.gather import gather
from statekeeper.metrics.names import BY_NAME, Scope, for_scope
from statekeeper.metrics.settings import Thresholds
from tests.metrics.support import A, B, FLAT, O, ROOT, at, build


def by_key(samples) -> dict[tuple, float]:
    out = {}
    for s in samples:
        key = (s.name, *(v for _, v in s.labels))
        assert key not in out, f"two samples of {key}"
        out[key] = s.value
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("metrics-wh") / "warehouse")


def ts(minutes: float) -> float:
    return at(minutes).timestamp()


def test_maintenance_figures(store):
    got = by_key(gather(store.warehouse, Scope.MAINTENANCE))
    expected = {
        # index: i0 failed, i1 succeeded (the cut), i2 partial (the newest)
        ("statekeeper_run_succeeded", "index", "partial"): 0, ("statekeeper_run_duration_seconds", "index"): 60,
        ("statekeeper_run_finished_timestamp_seconds", "index"): ts(-4),
        ("statekeeper_run_last_success_timestamp_seconds", "index"): ts(-58),
        ("statekeeper_runs_total", "index", "failed"): 1, ("statekeeper_runs_total", "index", "partial"): 1,
        ("statekeeper_runs_total", "index", "succeeded"): 1,
        # validation: one run, unrestorable, so never a success
        ("statekeeper_run_succeeded", "validate", "unrestorable"): 0,
        ("statekeeper_run_duration_seconds", "validate"): 120,
        ("statekeeper_run_finished_timestamp_seconds", "validate"): ts(-48),
        ("statekeeper_run_last_success_timestamp_seconds", "validate"): 0,
        ("statekeeper_runs_total", "validate", "unrestorable"): 1,
        # gc: an event log; g1 planned, then g2 executed its plan and failed one delete
        ("statekeeper_run_succeeded", "gc", "failed"): 0, ("statekeeper_run_duration_seconds", "gc"): 120,
        ("statekeeper_run_finished_timestamp_seconds", "gc"): ts(-28),
        ("statekeeper_run_last_success_timestamp_seconds", "gc"): ts(-39),
        ("statekeeper_runs_total", "gc", "failed"): 1, ("statekeeper_runs_total", "gc", "planned"): 1,
        ("statekeeper_gc_run_planned_files",): 3, ("statekeeper_gc_run_planned_bytes",): 18,
        ("statekeeper_gc_run_deleted_files",): 1, ("statekeeper_gc_run_deleted_bytes",): 10,
        ("statekeeper_gc_run_kept_after_recheck_files",): 1, ("statekeeper_gc_run_failed_files",): 1,
        ("statekeeper_gc_deleted_files_total",): 1, ("statekeeper_gc_deleted_bytes_total",): 10,
        ("statekeeper_gc_failed_deletes_total",): 1,
        # storage per job directory; the flat root's units chk-3 and shared are its one job "."
        ("statekeeper_job_stored_bytes", ROOT, A): 121, ("statekeeper_job_stored_bytes", ROOT, B): 70,
        ("statekeeper_job_stored_bytes", ROOT, O): 30, ("statekeeper_job_stored_bytes", FLAT, "."): 12,
        # A's shared SST is used by B's checkpoint (two segments of one file: counted once)
        ("statekeeper_job_pinned_bytes", ROOT, A): 100, ("statekeeper_job_pinned_bytes", ROOT, B): 0,
        ("statekeeper_job_pinned_bytes", ROOT, O): 0, ("statekeeper_job_pinned_bytes", FLAT, "."): 0,
        ("statekeeper_job_inline_bytes", ROOT, A): 7, ("statekeeper_job_inline_bytes", ROOT, B): 0,
        ("statekeeper_job_inline_bytes", ROOT, O): 0, ("statekeeper_job_inline_bytes", FLAT, "."): 2,
        # the plan g1 (g2 executed it): one file still planned in A; deleted and failed ones are not reclaimable
        ("statekeeper_job_reclaimable_bytes", ROOT, A): 5, ("statekeeper_job_reclaimable_bytes", ROOT, B): 0,
        ("statekeeper_job_reclaimable_bytes", ROOT, O): 0, ("statekeeper_job_reclaimable_bytes", FLAT, "."): 0,
        # the newest GC run's ownerless directories
        ("statekeeper_job_ownerless_bytes", ROOT, O): 30, ("statekeeper_job_ownerless_bytes", FLAT, "."): 6,
        # restorability per job directory
        ("statekeeper_job_newest_checkpoint_id", ROOT, A, "job"): 2,
        ("statekeeper_job_newest_checkpoint_timestamp_seconds", ROOT, A, "job"): ts(-20),
        ("statekeeper_job_newest_restorable", ROOT, A, "job"): 0,
        ("statekeeper_job_latest_restorable_checkpoint_id", ROOT, A, "job"): 1,
        ("statekeeper_job_latest_restorable_timestamp_seconds", ROOT, A, "job"): ts(-30),
        ("statekeeper_job_newest_checkpoint_id", ROOT, B, "job"): 5,
        ("statekeeper_job_newest_checkpoint_timestamp_seconds", ROOT, B, "job"): ts(-10),
        ("statekeeper_job_newest_restorable", ROOT, B, "job"): 1,
        ("statekeeper_job_latest_restorable_checkpoint_id", ROOT, B, "job"): 5,
        ("statekeeper_job_latest_restorable_timestamp_seconds", ROOT, B, "job"): ts(-10),
        ("statekeeper_job_newest_checkpoint_id", FLAT, ".", "job"): 3,
        ("statekeeper_job_newest_checkpoint_timestamp_seconds", FLAT, ".", "job"): ts(-5),
        ("statekeeper_job_newest_restorable", FLAT, ".", "job"): 0,
        ("statekeeper_threshold_index_age_seconds",): 26 * 3600, ("statekeeper_threshold_gc_age_seconds",): 26 * 3600,
    }
    assert got == pytest.approx(expected)


def test_dr_copy_figures(store):
    got = by_key(gather(store.warehouse, Scope.DR_COPY))
    assert got == pytest.approx({
        ("statekeeper_run_succeeded", "dr_copy", "succeeded"): 1, ("statekeeper_run_duration_seconds", "dr_copy"): 60,
        ("statekeeper_run_finished_timestamp_seconds", "dr_copy"): ts(-25),
        ("statekeeper_run_last_success_timestamp_seconds", "dr_copy"): ts(-25),
        ("statekeeper_runs_total", "dr_copy", "succeeded"): 1,
        ("statekeeper_dr_run_copied_files", "dr_copy"): 3, ("statekeeper_dr_run_copied_bytes", "dr_copy"): 300,
        ("statekeeper_dr_run_verified_snapshots", "dr_copy"): 2, ("statekeeper_dr_run_failed_snapshots", "dr_copy"): 0,
        ("statekeeper_dr_run_problems", "dr_copy"): 0,
        ("statekeeper_dr_copied_bytes_total", "dr_copy"): 300,
        # per job, from every verified checkpoint copy whichever DAG made it (the savepoint's is no recovery point)
        ("statekeeper_dr_recovery_point_timestamp_seconds", ROOT, A): ts(-20),
        ("statekeeper_dr_last_verified_copy_timestamp_seconds", ROOT, A): ts(-15),
        ("statekeeper_dr_snapshots_total", "dr_copy", "verified"): 2,
        ("statekeeper_threshold_dr_rpo_seconds",): 3600,
    })


def test_dr_follow_figures(store):
    thresholds, problems = Thresholds.parse({"dr_rpo": "30m", "follow_refusals": "5", "index_age": ""})
    assert problems == []
    got = by_key(gather(store.warehouse, Scope.DR_FOLLOW, thresholds))
    assert got == pytest.approx({
        ("statekeeper_run_succeeded", "dr_follow", "attention"): 0,
        ("statekeeper_run_duration_seconds", "dr_follow"): 60,
        ("statekeeper_run_finished_timestamp_seconds", "dr_follow"): ts(-5),
        ("statekeeper_run_last_success_timestamp_seconds", "dr_follow"): ts(-15),
        ("statekeeper_runs_total", "dr_follow", "attention"): 3, ("statekeeper_runs_total", "dr_follow", "succeeded"): 1,
        ("statekeeper_dr_run_copied_files", "dr_follow"): 0, ("statekeeper_dr_run_copied_bytes", "dr_follow"): 0,
        ("statekeeper_dr_run_verified_snapshots", "dr_follow"): 0,
        ("statekeeper_dr_run_failed_snapshots", "dr_follow"): 0, ("statekeeper_dr_run_problems", "dr_follow"): 2,
        ("statekeeper_dr_copied_bytes_total", "dr_follow"): 40,
        ("statekeeper_dr_recovery_point_timestamp_seconds", ROOT, A): ts(-20),
        ("statekeeper_dr_last_verified_copy_timestamp_seconds", ROOT, A): ts(-15),
        # A: refused (or failed) in the rounds at -10 and -5, after its verified copy at -15 (the refusal at -17
        # came before it); B: refused at -5, never copied
        ("statekeeper_dr_follow_consecutive_refusals", ROOT, A): 2,
        ("statekeeper_dr_follow_consecutive_refusals", ROOT, B): 1,
        ("statekeeper_dr_snapshots_total", "dr_follow", "failed"): 1,
        ("statekeeper_dr_snapshots_total", "dr_follow", "verified"): 1,
        ("statekeeper_threshold_dr_rpo_seconds",): 1800, ("statekeeper_threshold_follow_refusals",): 5,
    })


def test_each_scope_pushes_only_its_own_metrics(store):
    for scope in Scope:
        names = {s.name for s in gather(store.warehouse, scope)}
        assert names <= {m.name for m in for_scope(scope)}, scope


def test_an_empty_warehouse_pushes_only_the_thresholds(tmp_path):
    from statekeeper.tables import Warehouse

    samples = gather(Warehouse(str(tmp_path / "none")), Scope.MAINTENANCE)
    assert {s.name for s in samples} == {"statekeeper_threshold_index_age_seconds",
                                         "statekeeper_threshold_gc_age_seconds"}


def test_bad_thresholds_keep_the_defaults_and_say_which():
    thresholds, problems = Thresholds.parse({"dr_rpo": "soon", "follow_refusals": "0", "gc_age": "-1h"})
    assert thresholds == Thresholds()
    assert len(problems) == 3
    assert any("statekeeper_alert_dr_rpo" in p and "'soon'" in p and "default 1h" in p for p in problems), problems
    assert any("statekeeper_alert_follow_refusals" in p and "default 3" in p for p in problems), problems


def test_samples_take_exactly_their_metrics_labels():
    with pytest.raises(ValueError, match="takes labels"):
        figures.sample("statekeeper_job_stored_bytes", 1, root="r")
    with pytest.raises(KeyError):
        figures.sample("statekeeper_no_such_metric", 1)


def test_follow_mode_is_the_dr_jobs_own():
    from statekeeper.replicate.options import DrMode

    assert figures.FOLLOW_MODE == DrMode.FOLLOW.value


def test_names_follow_prometheus_conventions():
    for name, metric in BY_NAME.items():
        assert name.startswith("statekeeper_"), name
        assert name.endswith("_total") == (metric.kind.value == "counter"), name
        assert not set(metric.labels) & {"job", "dag", "warehouse", "instance"}, name
        # in seconds: a point in time or a duration, never an age that a push would freeze (thresholds aside)
        if name.endswith("_seconds") and not name.startswith("statekeeper_threshold_"):
            assert name.endswith(("_timestamp_seconds", "_duration_seconds")), name

