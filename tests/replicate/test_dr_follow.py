"""DR follow mode (`copy_to_dr --mode follow`) on a store real Flink wrote: rounds that copy each job's
newest completed checkpoint since its last verified copy, found by listing the roots and parsing its
`_metadata`, not by an index, chains and validation pass; the copies restore with the source moved away.

The store is a checkout of the prepared `chain_claim` store of the newest harness version (tests/plugins/
prepared.py): B was restored from A's checkpoint in CLAIM mode and C from B's, so B's and C's closures
span other jobs' directories. The index of that store is only where the rounds learn their roots; the
checkpoint a round copies is found in the store (one of them is hidden from the index here). After the
rounds, the report shows each job's RPO, the GC's retention on the DR root keeps each job's newest copy, and
those restore. A second test SIGKILLs a round mid-copy. A live job followed for minutes:
test_dr_follow_live.py.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import delta_log
from statekeeper.tables.catalog.dr import DR_COPIES
from tests.plugins.prepared import replace_bytes
from tests.replicate.support import copies, dr_pipeline, local, table, uri
from tests.tables.readers import every_table_reads_alike

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def _chk_dirs(src: str, job_dir: str) -> list[Path]:
    return sorted(local(src).glob(f"checkpoints/{job_dir}/chk-*"), key=lambda d: int(d.name[4:]))


def test_follow_rounds_copy_each_jobs_newest_checkpoint_once_and_the_copies_restore(prepared_store, request,
                                                                                       tmp_path):
    co = prepared_store("chain_claim", VERSION).checkout(tmp_path, request.node.nodeid)
    fx, src, p = co.fixture, co.src, co.pipeline
    target = uri(tmp_path / "dr")
    args = ["--mode", "follow", "--target", target, "--allowed-targets", target]
    jobs = {j["name"]: Path(j["job_dir"]).name for j in fx.manifest["jobs"]}

    # A has not completed its newest checkpoint yet (its directory is there, its _metadata is not):
    # the first round copies A's one before it.
    a_chks = _chk_dirs(src, jobs["A"])
    a_newest = a_chks[-1]
    held = tmp_path / "held-metadata"
    shutil.move(str(a_newest / "_metadata"), held)
    code, first = p.dr(*args)
    assert code == 0, first
    recorded_first = delta_log.latest_version(p.warehouse, DR_COPIES.name)
    assert first["verified"] == first["snapshots"] == len(jobs) and first["failed"] == 0, first
    rows = {r["job_dir"]: r for r in copies(p.warehouse, first["run_id"])}
    assert {r["selected_by"] for r in rows.values()} == {"follow"}
    assert rows[jobs["A"]]["checkpoint_id"] == int(a_chks[-2].name[4:])
    for name, job_dir in jobs.items():
        if name != "A":
            assert rows[job_dir]["checkpoint_id"] == int(_chk_dirs(src, job_dir)[-1].name[4:]), name
        assert rows[job_dir]["status"] == "verified" and local(rows[job_dir]["target_metadata_uri"]).is_file()
        # the recovery point: when the source checkpoint completed and when its copy was published, each as stamped
        # by its own store
        completed = local(rows[job_dir]["source_metadata_uri"]).stat().st_mtime
        published = local(rows[job_dir]["target_metadata_uri"]).stat().st_mtime
        assert rows[job_dir]["source_completed_at"].timestamp() == pytest.approx(completed, abs=1e-3), name
        assert rows[job_dir]["published_at"].timestamp() == pytest.approx(published, abs=1e-3), name
        assert rows[job_dir]["published_at"] > rows[job_dir]["source_completed_at"], name

    # A completes it: the next round copies only A's new checkpoint, and only the objects the target lacks
    shutil.move(held, a_newest / "_metadata")
    code, second = p.dr(*args)
    assert code == 0, second
    assert second["snapshots"] == second["verified"] == 1 and second["files_skipped"] > 0, second
    row, = copies(p.warehouse, second["run_id"])
    assert (row["job_dir"], row["checkpoint_id"]) == (jobs["A"], int(a_newest.name[4:]))

    # nothing new: nothing copied
    code, third = p.dr(*args)
    assert code == 0 and third["snapshots"] == 0 and third["files_copied"] == 0, third
    assert copies(p.warehouse, third["run_id"]) == []

    # a newest checkpoint whose _metadata does not parse is named, never copied, and the run says so (exit 1)
    b_next = _chk_dirs(src, jobs["B"])[-1].with_name(f"chk-{int(_chk_dirs(src, jobs['B'])[-1].name[4:]) + 1}")
    b_next.mkdir()
    replace_bytes(b_next / "_metadata", b"not a checkpoint")
    # and A's copy lost its record (a round killed between publishing it and committing its dr_copies row, played by
    # putting the table back to before the second round): the copy is at the target, so an idle round would pass it
    # by; this round reads dr_copies for B and records A's copy again, copying nothing
    delta_log.restore(p.warehouse, DR_COPIES, recorded_first,
                      expected_version=delta_log.latest_version(p.warehouse, DR_COPIES.name))
    code, fourth = p.dr(*args)
    assert code == 1 and fourth["status"] == "attention", fourth
    assert fourth["snapshots"] == fourth["verified"] == 1 and fourth["files_copied"] == 0, fourth
    healed, = copies(p.warehouse, fourth["run_id"])
    assert (healed["job_dir"], healed["checkpoint_id"], healed["status"]) == (jobs["A"], int(a_newest.name[4:]),
                                                                              "verified")
    assert any(uri(b_next / "_metadata") in problem and "does not parse" in problem
               for problem in fourth["problems"]), fourth["problems"]
    # the refusal is recorded for what counts it per job (alerting): the round's dr_runs.refused
    [round_row] = [r for r in table(p.warehouse, "dr_runs") if r["run_id"] == fourth["run_id"]]
    assert [(r["job_dir"], r["metadata_uri"]) for r in round_row["refused"]] == [(jobs["B"], uri(b_next / "_metadata"))]
    assert "does not parse" in round_row["refused"][0]["reason"], round_row["refused"]
    assert not list(local(target).rglob(f"{b_next.name}/_metadata"))
    shutil.rmtree(b_next)

    # the report page's RPO per job: the age of the newest source checkpoint a verified copy holds, and the lags of
    # the job's copies, both from dr_copies
    _check_report(p, jobs)

    # retention at the target keeps the newest follow copy of each job: the GC's own rules on the DR root, in a
    # warehouse of its own, as the nightly DAG runs them (docs/dr-copy.md, "Retention at the target")
    older_a = local(rows[jobs["A"]]["target_metadata_uri"])
    newest = {n: local((row if n == "A" else rows[jobs[n]])["target_metadata_uri"]) for n in jobs}
    t = dr_pipeline(p.spark, tmp_path / "dr-side", [target + "/checkpoints"])
    (tmp_path / "dr-side").mkdir()
    t.refresh()
    code, gc = t.gc("--mode", "delete", "--retain-last", "1", "--older-than", "1s", "--allow-short-grace")
    assert code == 0 and gc["deleted"] > 0, gc
    assert not older_a.exists() and all(m.is_file() for m in newest.values())

    # every table these runs wrote reads alike through Delta's Spark reader (the jobs) and the delta-rs TableReader
    # (the CLI, explain, the report page)
    read = {**every_table_reads_alike(p.spark, p.warehouse), **every_table_reads_alike(p.spark, t.warehouse)}
    assert {"references", "dependencies", "validation_results", "dr_copies", "dr_files", "gc_actions"} <= read.keys()
    assert read["references"] > 0 and read["gc_actions"] > 0, read

    # the newest copy of every job restores from the target alone (C's and B's reach into A's and B's shared/)
    cases = [(m.parent, "chain_claim", n) for n, m in newest.items()]
    local(src).rename(tmp_path / "src-moved-away")
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(c[0]), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed


def _check_report(p, jobs: dict[str, str]) -> None:
    from datetime import datetime, timezone

    from statekeeper.report.job import BuildReport

    rows = [r for r in table(p.warehouse, "dr_copies") if r["status"] == "verified"]
    before = datetime.now(timezone.utc)
    report = BuildReport(p.spark).warehouse(p.warehouse.uri).progress_interval(0).execute()
    after = datetime.now(timezone.utc)
    assert report.status == "succeeded", report.summary()
    data = json.loads(local(report.report_uri).with_name("report.json").read_text())
    health = {h["job_dir"]: h for h in data["health"]}
    for name, job_dir in jobs.items():
        own = [r for r in rows if r["job_dir"] == job_dir]
        copy = health[job_dir]["last_dr_copy"]
        point = max(r["source_completed_at"] for r in own)
        assert datetime.fromisoformat(copy["source_completed_at"]) == point, name
        assert (before - point).total_seconds() - 1 <= copy["rpo_seconds"] <= (after - point).total_seconds() + 1
        lags = sorted((r["published_at"] - r["source_completed_at"]).total_seconds() for r in own)
        assert sorted(copy["lags"]) == pytest.approx(lags, abs=1e-3), name
    assert len(health[jobs["A"]]["last_dr_copy"]["lags"]) == 2    # its first copy and the re-recorded one
    page = (local(report.report_uri)).read_text()
    assert page.count('class="rpo"') == len(jobs) and '<svg class="lag"' in page


def test_a_follow_round_killed_mid_copy_publishes_nothing_incomplete_and_the_next_round_completes(
        prepared_store, request, tmp_path):
    """SIGKILL of a follow round (a spark-submit, paced so that it is mid-copy): no target `_metadata` names an
    object the target lacks, at any moment; the next round copies every job's newest checkpoint (what the killed
    round wrote on local disk has no record that proves its bytes, so it is copied again: docs/dr-copy.md,
    "Identity"), and those copies name only objects that are there."""
    from statekeeper.storage import RoutingFileIO, StorageConfig
    from tests.plugins.spark import job_process_env, kill_job_when
    from tests.replicate.test_dr_kill_s3 import _incomplete

    co = prepared_store("chain_claim", VERSION).checkout(tmp_path, request.node.nodeid)
    fx, p = co.fixture, co.pipeline
    target = uri(tmp_path / "dr")
    fio = RoutingFileIO(StorageConfig())

    def mid_copy() -> bool:
        assert not _incomplete(fio, target)
        return len(list(fio.list(target))) >= 8

    kill_job_when("copy_to_dr", ["--warehouse", p.warehouse.uri, "--mode", "follow", "--target", target,
                                 "--allowed-targets", target, "--max-copies-per-second", "4"], mid_copy,
                  cwd=tmp_path, env=job_process_env(), what="8 objects at the target")
    assert not _incomplete(fio, target)

    code, again = p.dr("--mode", "follow", "--target", target, "--allowed-targets", target)
    assert code == 0 and again["verified"] == again["snapshots"] == len(fx.manifest["jobs"]), again
    assert not _incomplete(fio, target)
    for row in copies(p.warehouse, again["run_id"]):
        assert row["status"] == "verified" and local(row["target_metadata_uri"]).is_file(), row


