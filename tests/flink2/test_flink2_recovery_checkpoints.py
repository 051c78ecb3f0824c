"""Checkpoints completed during a restore's recovery (FLIP-547, Flink 2.3): what they reference, and GC, validation
and DR copy on a store of them, proven by restores in real Flink.

The `recovery_checkpoints` store (tests/harness/README.md): A's unaligned checkpoints hold ~10k elements in flight;
B restores A's newest by CLAIM with `execution.checkpointing.during-recovery.enabled` (and
`execution.checkpointing.unaligned.recover-output-on-downstream.enabled`, without which it does nothing) and takes
all its checkpoints before it has processed those elements, as the snapshots' own operator state shows (the
generator's reading, in the manifest). B retains 2, so Flink deleted the claimed checkpoint of A when B's second
checkpoint completed, during B's recovery.

What GC assumes, and these tests show for Flink 2.3.0: a job needs no file that none of its retained `_metadata`
names. A restored task reads all the in-flight data of the snapshot it restored before it accepts a checkpoint
barrier, and a checkpoint taken during recovery writes what the task has not processed yet into its own channel
state (docs/flink2.md, "Checkpoints during recovery"). So:

1. B's checkpoints name no file of the restored checkpoint (whose directory Flink deleted while B recovered); their
   channel state lies in their own `chk-N/`, their keyed state partly in A's `shared/` (CLAIM).
2. GC `--retain-last 1 --mode delete` (1 s grace) on a relocated copy deletes exactly the files the remaining
   `_metadata` do not name (Flink's own reading), the expired checkpoint of B taken during recovery with its channel
   state among them, and keeps every file they name.
3. Validation finds every snapshot restorable; the DR copy carries each job's latest restorable checkpoint, every
   file it names at the target.
4. One verifier JVM: the checkpoints GC kept restore, and so do the DR copies with the originals moved away.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, actions, listing, local, pipeline, relocated, uri
from tests.harness import flink as harness_flink
from tests.harness import scenarios, store
from tests.replicate.support import copies, dr_pipeline

SCENARIO = "recovery_checkpoints"
_VERSIONS = [v for v in harness.FLINK_VERSIONS if harness.supports(v, SCENARIO)]
VERSION = _VERSIONS[-1] if _VERSIONS else None
needs_version = pytest.mark.skipif(VERSION is None, reason=f"no configured Flink version has {SCENARIO} (2.3+)")
OPTIONS = ("execution.checkpointing.during-recovery.enabled",
           "execution.checkpointing.unaligned.recover-output-on-downstream.enabled")
CHANNEL_SLOTS = ("input_channel", "output_channel")


def _chk_id(path: str | Path) -> int:
    return int(Path(path).name.split("-", 1)[1])


def _newest(job: dict) -> str:
    return max(job["retained_checkpoints"], key=_chk_id)


@pytest.mark.unit
def test_the_generator_is_in_no_other_plans_hash(tmp_path, monkeypatch):
    """RecoveryGenerate.java changes only this scenario's fixture hash (every other cached store stays valid)."""
    before = {(v, s): store.generator_hash(v, s) for v in harness.FLINK_VERSIONS for s in scenarios.scenarios_for(v)}
    copy = tmp_path / "java"
    shutil.copytree(harness_flink.JAVA_SOURCES, copy)
    (source,) = copy.rglob("RecoveryGenerate.java")
    source.write_text(source.read_text() + "\n// changed\n")
    monkeypatch.setattr(harness_flink, "JAVA_SOURCES", copy)
    changed = {key for key in before if store.generator_hash(*key) != before[key]}
    assert changed == {key for key in before if key[1] == SCENARIO}


@pytest.fixture(scope="module")
def fx(flink_fixture) -> harness.Fixture:
    return flink_fixture(VERSION, SCENARIO)


@needs_version
def test_the_restored_job_completed_checkpoints_during_its_recovery(fx):
    a, b = fx.job("A"), fx.job("B")
    assert (b["restored_from_job"], b["claim_mode"]) == ("A", "CLAIM")
    assert b["restored_from"] == _newest_completed(a)
    assert all(b["config"][f"flink.{key}"] == "true" for key in OPTIONS)
    r = b["recovery"]
    assert r["restored_checkpoint_id"] == _chk_id(b["restored_from"])
    assert r["restored_in_flight_elements"] == r["restored_gate_next"] - r["restored_tally_count"] > 0
    # Every element the restored snapshot held in flight is below its gate position R, and passes the tally once:
    # a checkpoint whose tally count is below R was taken while B still had such elements to process.
    assert [c["dir"] for c in r["retained_checkpoints"]] == b["retained_checkpoints"]
    assert all(c["tally_count"] < r["restored_gate_next"] and c["taken_during_recovery"]
               for c in r["retained_checkpoints"]), r
    # One checkpoint in flight at a time: each one completed before the next was triggered, so every checkpoint
    # older than one taken during recovery completed during recovery.
    newest = _chk_id(_newest(b))
    assert r["completed_during_recovery"] == [c for c in b["completed_checkpoints"] if c < newest]
    assert r["completed_during_recovery"]
    # B retains `retained` checkpoints: the claimed one was subsumed (and Flink deleted its directory) when B's
    # `retained`-th checkpoint completed, during B's recovery.
    subsuming = b["completed_checkpoints"][b["config"]["retained"] - 1]
    assert subsuming in r["completed_during_recovery"]
    assert not Path(b["restored_from"]).exists()


def _newest_completed(job: dict) -> str:
    return str(Path(job["job_dir"]) / f"chk-{max(job['completed_checkpoints'])}")


@needs_version
def test_checkpoints_taken_during_recovery_name_only_their_own_channel_state(fx, flink_oracle):
    b = fx.job("B")
    restored = uri(b["restored_from"]) + "/"
    a_shared = uri(fx.job("A")["job_dir"]) + "/shared/"
    oracle = flink_oracle(VERSION, SCENARIO)
    for chk in b["retained_checkpoints"]:
        reading = oracle[str(Path(chk) / "_metadata")]
        own = uri(chk) + "/"
        channel = [h for h in reading["handles"] if h["slot"] in CHANNEL_SLOTS]
        # the restored elements it had not processed yet, persisted again: in this checkpoint's own directory
        assert channel and all(normalize_uri(h["path"]).startswith(own) for h in channel), channel[:3]
        assert sum(h["size"] for h in channel) > 0
        files = {normalize_uri(f["path"]) for f in reading["referenced_files"]}
        assert not any(f.startswith(restored) for f in files)
        assert any(f.startswith(a_shared) for f in files)    # A's SSTs, claimed
        assert all(local(f).is_file() for f in files)


@pytest.fixture(scope="module")
def run(spark, fx, tmp_path_factory):
    base = tmp_path_factory.mktemp("flink2-recovery")
    jobs = fx.manifest["jobs"]
    # GC on one relocated copy, which holds every root its jobs restore from (--roots-complete)
    gc_copy = relocated(fx, base / "gc" / "store")
    in_gc_copy = _mover(fx, gc_copy)
    time.sleep(1.5)                     # every file past the 1 s grace period
    gc = pipeline(spark, base / "gc", [gc_copy])
    gc.refresh()
    before = listing(gc.roots)
    kept = {in_gc_copy(_newest(job)) + "/_metadata" for job in jobs}      # what --retain-last 1 keeps
    truth = oracle_references(VERSION, [local(m) for m in sorted(kept)])
    gc_result = gc.gc("--mode", "delete", "--retain-last", "1", "--roots-complete", *SHORT)
    after = listing(gc.roots)

    # validation and DR copy on another copy, under a directory the DR restores then run without
    src = uri(base / "src")
    dr_copy = relocated(fx, base / "src" / SCENARIO)
    dr = dr_pipeline(spark, base / "dr", [f"{dr_copy}/checkpoints", f"{dr_copy}/savepoints"])
    dr.refresh()
    validation = dr.validate()
    target = uri(base / "target")
    pairs = [f"--target={r}={target}/{r[len(src) + 1:]}" for r in dr.roots]
    dr_result = dr.dr(*pairs, "--allowed-targets", target)
    in_dr_copy = _mover(fx, dr_copy)
    return {"base": base, "jobs": jobs, "gc": gc, "in_gc_copy": in_gc_copy, "before": before, "after": after,
            "kept": kept, "referenced": {f for files in truth.values() for f in files}, "gc_result": gc_result,
            "dr": dr, "in_dr_copy": in_dr_copy, "validation": validation, "dr_result": dr_result,
            "target": target, "at_target": {job["name"]: target + in_dr_copy(_newest(job))[len(src):] for job in jobs}}


def _mover(fx: harness.Fixture, copy: str):
    """Where a path of the cached store is in a relocated copy (as a URI)."""
    return lambda path: copy + uri(path)[len(uri(fx.root)):]


@pytest.fixture(scope="module")
def restored(run) -> dict:
    """One verifier JVM: each job's checkpoint GC kept, and each DR copy with the source renamed away."""
    gc_cases = [harness.VerifyCase(local(run["in_gc_copy"](_newest(job))), SCENARIO, job["name"])
                for job in run["jobs"]]
    dr_cases = [harness.VerifyCase(local(u), SCENARIO, name) for name, u in sorted(run["at_target"].items())]
    moved_away = run["base"] / "src-moved-away"
    (run["base"] / "src").rename(moved_away)
    try:
        results = harness.verify_restore_many(VERSION, gc_cases + dr_cases)
    finally:
        moved_away.rename(run["base"] / "src")
    return {"gc": list(zip(gc_cases, results[:len(gc_cases)], strict=True)),
            "dr": list(zip(dr_cases, results[len(gc_cases):], strict=True))}


def _failed(pairs) -> list:
    return [(str(case.snapshot_dir), r.output[-2000:]) for case, r in pairs if not r.ok]


@pytest.mark.slow
@needs_version
def test_gc_deletes_exactly_what_the_kept_checkpoints_do_not_name(run, fx):
    code, result = run["gc_result"]
    assert code == 0, result.get("blocked") or result
    before, after = set(run["before"]), set(run["after"])
    expected = before - run["referenced"] - run["kept"]
    assert before - after == expected, sorted((before - after) ^ expected)[:10]
    assert run["referenced"] <= after                  # every file a kept `_metadata` names is still there
    rows = {r["uri"]: r for r in actions(run["gc"].warehouse, result["run_id"])}
    assert all(rows[u]["outcome"] == "deleted" for u in before - after)
    # The expired checkpoint B took during recovery went whole, its copy of the restored in-flight data with it:
    # B's newest (also taken during recovery) holds that data in its own channel state.
    b = fx.job("B")
    expired = [run["in_gc_copy"](d) + "/" for d in b["retained_checkpoints"] if d != _newest(b)]
    gone = {u for u in before - after if any(u.startswith(d) for d in expired)}
    assert expired and gone == {u for u in before if any(u.startswith(d) for d in expired)}
    assert {rows[u]["reason"] for u in gone} == {"expired_snapshot"}
    # What B's newest uses of A (SSTs, claimed) stays, though A's restored checkpoint is gone.
    a_shared = run["in_gc_copy"](fx.job("A")["job_dir"]) + "/shared/"
    assert {f for f in run["referenced"] if f.startswith(a_shared)} <= after


@pytest.mark.slow
@needs_version
def test_the_checkpoints_gc_kept_restore(restored):
    assert not _failed(restored["gc"]), _failed(restored["gc"])


@pytest.mark.slow
@needs_version
def test_validation_finds_every_snapshot_restorable(run):
    assert run["validation"] == 0
    wh = run["dr"].warehouse
    summaries = {r["snapshot_uri"]: r for r in _table(wh, "validation_results") if r["check"] == "snapshot"}
    expected = {run["in_dr_copy"](d) + "/_metadata" for job in run["jobs"] for d in job["retained_checkpoints"]}
    assert set(summaries) == expected
    assert all(r["restorable"] for r in summaries.values()), [r for r in summaries.values() if not r["restorable"]]
    jobs = {r["location"]: r for r in _table(wh, "validation_jobs") if r["kind"] == "job"}
    for job in run["jobs"]:
        row = jobs[run["in_dr_copy"](job["job_dir"])]
        assert row["newest_restorable"], row
        assert row["latest_restorable_uri"] == run["in_dr_copy"](_newest(job)) + "/_metadata"


def _table(warehouse, name: str) -> list[dict]:
    return DeltaTable(warehouse.delta_location(name)).to_pyarrow_table().to_pylist()


@pytest.mark.slow
@needs_version
def test_dr_copy_carries_every_file_the_checkpoints_name(run):
    code, result = run["dr_result"]
    assert code == 0, result
    assert result["status"] == "succeeded" and result["failed"] == 0 and result["verified"] == result["snapshots"]
    rows = copies(run["dr"].warehouse, result["run_id"])
    assert {r["source_metadata_uri"] for r in rows} == {
        run["in_dr_copy"](_newest(job)) + "/_metadata" for job in run["jobs"]}
    names = sorted(run["at_target"])
    readings = harness.run_oracle(VERSION, [local(run["at_target"][n]) / "_metadata" for n in names])
    used = {}
    for name, reading in zip(names, readings, strict=True):
        assert "error" not in reading, reading
        used[name] = {normalize_uri(f["path"]) for f in reading["referenced_files"]}
        assert all(f.startswith(run["target"] + "/") and local(f).is_file() for f in used[name]), name
    # B's copy uses the copies of A's SSTs (claimed) at the target
    a_at_target = run["at_target"]["A"].rsplit("/", 1)[0] + "/shared/"
    assert any(f.startswith(a_at_target) for f in used["B"])


@pytest.mark.slow
@needs_version
def test_dr_copies_restore_with_the_originals_moved_away(restored):
    assert not _failed(restored["dr"]), _failed(restored["dr"])
