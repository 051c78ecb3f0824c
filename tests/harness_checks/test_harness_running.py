"""The live job of the harness (tests/harness/running.py): it checkpoints while the test works,
Flink subsumes (deletes) old shared files as it goes, and it stops with honest statistics and a
restorable newest checkpoint. Tests that run something (GC) against a live job rely on this."""
from __future__ import annotations

import time

import pytest

import tests.harness as harness
from tests.harness.runner import HarnessRunError
from tests.plugins.flink import matrix_versions

pytestmark = [pytest.mark.flink, pytest.mark.slow]


def shared_files(job_dir):
    shared = job_dir / "shared"
    return {p.name for p in shared.iterdir()} if shared.is_dir() else set()


# Every live-job user runs the newest version (tests/gc/test_gc_running_job.py); older ones nightly.
@pytest.mark.parametrize("version", matrix_versions())
def test_live_job_checkpoints_until_stopped_and_restores(flink_harness, tmp_path, version):
    root = tmp_path / "checkpoints"
    with flink_harness.start_job(version, root) as job:
        assert job.running() and job.job_dir.parent == root
        assert any((d / "_metadata").is_file() for d in job.job_dir.glob("chk-*"))
        seen: set[str] = set()
        deleted: set[str] = set()
        until = time.monotonic() + 10
        while time.monotonic() < until:
            now = shared_files(job.job_dir)
            deleted |= seen - now
            seen |= now
            time.sleep(0.2)
        stats = job.stop()
    assert not job.running()
    assert stats.job_id == job.job_id and stats.job_dir == job.job_dir
    assert stats.stopped_by == "stop_file" and stats.job_failure is None, stats.output[-3000:]
    assert stats.failed == 0 and stats.failure_reasons == [], stats.failure_reasons
    assert stats.completed >= 10, stats
    assert stats.ok
    # Subsumption really happens while the job runs: shared SSTs come and go (what GC races with).
    assert len(deleted) >= 10, (len(seen), len(deleted))
    # Cancelled with one retained checkpoint: the newest, complete, restorable.
    chk = stats.newest_checkpoint
    assert chk is not None and chk.parent == job.job_dir and (chk / "_metadata").is_file()
    assert chk.name == f"chk-{stats.raw['latest_completed_id']}" or \
        int(chk.name[4:]) > stats.raw["latest_completed_id"]   # one may complete between stats and cancel
    assert [d.name for d in job.job_dir.glob("chk-*") if (d / "_metadata").is_file()] == [chk.name]
    verdict = flink_harness.verify_restore(version, chk)
    assert verdict.ok, verdict.output[-3000:]


def test_live_job_context_kills_the_jvm_on_error(flink_harness, tmp_path):
    version = harness.FLINK_VERSIONS[-1]
    with pytest.raises(KeyError):
        with flink_harness.start_job(version, tmp_path / "checkpoints") as job:
            raise KeyError("the test body failed")
    assert not job.running()
    with pytest.raises(HarnessRunError):
        job.stop()          # killed: no statistics to give
