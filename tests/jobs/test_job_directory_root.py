"""GC, the report and in-place compaction judge a job as a job, whatever level its root is given at.

A root may be a job's own directory: Flink writes checkpoints that way with `create-subdir` off, and a team
that gives GC one root per job points it at `<checkpoints>/<job id>`. chk-N/, shared/ and taskowned/ then
sit directly in the root. The index names such units by their directory ("chk-5", "shared"); GC's job-level
rules (the retention ranking, "looks active", the grace window's history, ownerless directories, ForSt
activity) used to group by that name, so each chk-N was a job with one checkpoint, shared/ a job without
a snapshot, and taskowned/ a job judged by its own newest file.

The cached `incremental` store (one job, chk-3..5 retained), aged 10 days, with planted leftovers
(an orphan in shared/, a dead upload in a chk-N without `_metadata`, an orphan in taskowned/): the oldest
retained checkpoint is removed between two index runs (as Flink's subsumption does), then the newest
`_metadata` is touched (the job is running). GC over the job's own directory must plan exactly what GC
over its parent plans: the shared orphan and the dead upload, not the taskowned orphan (a running
job's), not the shared files only the removed checkpoint named (the grace window's history, in a job
that looks active), and, with `--retain-last 1`, the older checkpoint. The report over the job's own
directory shows what the report over its parent shows, with the job named "." (its storage, health and
`_metadata` series as one job, no lineage edge from its chk-N/ to its own shared/). In-place compaction of
the newest checkpoint is refused while the job's shared/ is being written, though its chk-N/ is old. Then
GC deletes, and the newest checkpoint restores in Flink.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.compact.plan import BACKUP_NAME
from statekeeper.tables import Warehouse
from tests.compact.support import CompactPipeline, compactions
from tests.gc.support import Pipeline, actions, local, relocated, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
DAY = 86400


def _age(root: Path, days: float) -> None:
    then = time.time() - days * DAY
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.utime(Path(dirpath) / name, (then, then), follow_symlinks=False)


def _plant(path: Path, days: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(2048))
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def _plan(p: Pipeline, job_dir: Path, *args: str) -> dict[str, str]:
    """The run's plan: path below the job directory -> reason."""
    code, result = p.gc("--older-than", "1d", *args)
    assert code == 0, result
    base = uri(job_dir) + "/"
    rows = actions(p.warehouse, result["plan_run_id"])
    assert all(r["uri"].startswith(base) for r in rows), [r["uri"] for r in rows if not r["uri"].startswith(base)]
    return {r["uri"][len(base):]: r["reason"] for r in rows}


@pytest.fixture(scope="module")
def views(spark, flink_fixture, tmp_path_factory) -> dict:
    fx = flink_fixture(VERSION, "incremental")
    base = tmp_path_factory.mktemp("gc-flat")
    store = local(relocated(fx, base / "store"))
    job_dir = local(uri(store) + uri(fx.job("A")["job_dir"])[len(uri(fx.root)):])
    _age(store, 10)
    planted = {"shared/orphan-1": 10, "chk-1/dead-upload": 10, "taskowned/orphan-2": 10}
    for rel, days in planted.items():
        _plant(job_dir / rel, days)
    nested = CompactPipeline(spark, Warehouse(str(base / "wh-nested")), [uri(job_dir.parent)], base / "nested")
    flat = CompactPipeline(spark, Warehouse(str(base / "wh-flat")), [uri(job_dir)], base / "flat")
    for p in (nested, flat):
        p.base.mkdir()
        p.refresh()
    checkpoints = sorted(job_dir.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    oldest, newest = checkpoints[0].parent, checkpoints[-1]
    shutil.rmtree(oldest)            # Flink subsumed it after the first index run
    os.utime(newest)                 # the job is running: its newest checkpoint is fresh
    for p in (nested, flat):
        p.refresh()
    return {"job_dir": job_dir, "nested": nested, "flat": flat, "newest": newest.parent}


def test_a_job_directory_as_root_gets_the_plan_its_parent_gets(views):
    job_dir, nested, flat = views["job_dir"], views["nested"], views["flat"]
    for args in ((), ("--roots-complete", "--retain-last", "1")):
        want = _plan(nested, job_dir, *args)
        assert _plan(flat, job_dir, *args) == want, args
        # what GC over the parent plans, spelled out: the leftovers of a running job; of shared/ only the planted
        # orphan (the SSTs only the removed checkpoint named stay: the grace window's history of a job that looks
        # active); never the running job's task-owned file
        assert {rel for rel in want if rel.startswith("shared/")} == {"shared/orphan-1"}, want
        assert want.get("chk-1/dead-upload") == "failed_checkpoint" and "taskowned/orphan-2" not in want, want
    older = sorted((m.parent.name for m in job_dir.glob("chk-*/_metadata") if m.parent != views["newest"]))
    assert older and all(want.get(f"{name}/_metadata") == "expired_snapshot" for name in older), want


def _report(p: Pipeline) -> dict:
    from spark_jobs.validate_checkpoints import main as validate
    from statekeeper.report.job import BuildReport
    from statekeeper.report.options import ReportOptions

    assert validate(["--warehouse", p.warehouse.uri, "--progress-interval", "0", "--no-quality-suite"]) == 0
    out = p.base / "report"
    (BuildReport(p.spark).warehouse(p.warehouse.uri).progress_interval(0)
     .configure(ReportOptions(out=str(out))).execute())
    return json.loads((out / "report.json").read_text())


def test_the_report_over_the_job_directory_shows_one_job_as_over_its_parent(views):
    job_dir = views["job_dir"]
    nested, flat = _report(views["nested"]), _report(views["flat"])
    named = {(uri(job_dir.parent), job_dir.name): (uri(job_dir), ".")}

    def keyed(rows: list[dict], *drop: str) -> dict:
        return {named.get((r["root"], r["job_dir"]), (r["root"], r["job_dir"])):
                {k: v for k, v in r.items() if k not in ("root", "job_dir", *drop)} for r in rows}

    # the job id is a path segment above the job's own directory: a root below it does not name one
    assert len(nested["storage"]) == 1 and keyed(flat["storage"], "job_id") == keyed(nested["storage"], "job_id")
    assert keyed(flat["health"], "job_id") == keyed(nested["health"], "job_id")
    assert flat["health"][0]["newest_restorable"] is True
    assert flat["jobs_not_validated"] == nested["jobs_not_validated"] == 0
    assert flat["lineage_edges"] == nested["lineage_edges"] == [] and flat["lineage_edge_count"] == 0
    series = lambda d: sorted((p["checkpoint_id"], p["metadata_bytes"], p["inline_bytes"])  # noqa: E731
                              for p in d["metadata_series"])
    assert len(series(nested)) == 2 and series(flat) == series(nested)
    same = lambda d: {k: v for k, v in d.items() if "run_id" not in k and not k.endswith("_at")}  # noqa: E731
    assert same(flat["totals"]) == same(nested["totals"]) and same(flat["gc"]) == same(nested["gc"])


def test_in_place_compaction_is_refused_while_the_job_writes_its_shared_files(views):
    # the newest checkpoint is old, and an upload of the next one is in flight in shared/: the job runs. By its
    # chk-N/ alone (the unit the index names) the job looked stopped and its newest checkpoint was rewritten.
    flat, newest = views["flat"], views["newest"]
    then = time.time() - 10 * DAY
    os.utime(newest / "_metadata", (then, then))
    _plant(views["job_dir"] / "shared" / "in-flight", 0)
    flat.refresh()
    assert flat.validate() == 0
    original = (newest / "_metadata").read_bytes()
    code, result = flat.compact("--snapshot", uri(newest), "--in-place")
    row, = compactions(flat.warehouse, result["run_id"])
    assert code == 1 and row["status"] == "refused", (result, row)
    assert "--quiet-period" in row["problem"] and uri(views["job_dir"]) in row["problem"], row
    assert (newest / "_metadata").read_bytes() == original and not (newest / BACKUP_NAME).exists()


def test_deleting_over_the_job_directory_keeps_the_newest_checkpoint_restorable(views):
    flat, job_dir = views["flat"], views["job_dir"]
    code, result = flat.gc("--older-than", "1d", "--mode", "delete", "--retain-last", "1")
    assert code == 0 and result["failed"] == 0 and result["deleted"] >= 2, result
    assert not (job_dir / "shared" / "orphan-1").exists() and (job_dir / "taskowned" / "orphan-2").exists()
    verified, = harness.verify_restore_many(VERSION, [(views["newest"], "incremental", "A")])
    assert verified.ok, verified.output[-3000:]
