"""DR follow mode (`copy_to_dr --mode follow`) on a store real Flink wrote: rounds that copy each job's
newest completed checkpoint since its last verified copy, found by listing the roots and parsing its
`_metadata`, not by an index, chains and validation pass; the copies restore with the source moved away.

The store is a checkout of the prepared `chain_claim` store of the newest harness version (tests/plugins/
prepared.py): B was restored from A's checkpoint in CLAIM mode and C from B's, so B's and C's closures
span other jobs' directories. The index of that store is only where the rounds learn their roots; the
checkpoint a round copies is found in the store (one of them is hidden from the index here).
A live job followed for minutes, on local disk and S3, is the next step of follow mode (not here).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import delta_log
from statekeeper.tables.catalog.dr import DR_COPIES
from tests.plugins.prepared import replace_bytes
from tests.replicate.support import copies, local, uri

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
    assert not list(local(target).rglob(f"{b_next.name}/_metadata"))
    shutil.rmtree(b_next)

    # the newest copy of every job restores from the target alone (C's and B's reach into A's and B's shared/)
    cases = [(local(rows[jobs[n]]["target_metadata_uri"]).parent, "chain_claim", n) for n in jobs if n != "A"]
    cases.append((local(row["target_metadata_uri"]).parent, "chain_claim", "A"))
    local(src).rename(tmp_path / "src-moved-away")
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(c[0]), r.output[-2000:]) for c, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed
