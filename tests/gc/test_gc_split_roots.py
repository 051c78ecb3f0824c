"""GC over some of the roots of a CLAIM chain deletes nothing another root's jobs need (issue 28, part 1).

Many deployments give each job its own checkpoint root. Here the cached `chain_claim` store (A; B and
B_legacy restored from A's chk-4 in CLAIM and LEGACY mode; C restored from B in CLAIM mode) is split
the way such a deployment looks after the hand-over: A's job directory under `deployA/checkpoints`,
B, B_legacy and C under `deployB/checkpoints`, every `_metadata` rewritten to the new places. A's
checkpoints are removed as Flink removes them with its default `num-retained: 1`: the two older ones by
A's own subsumption, the restored chk-4 by B once B subsumed it (CLAIM). A's directory is left with its
`shared/` files and no `_metadata`: nothing under `deployA` references them, and B, B_legacy and C
still read them.

A GC over `deployA` alone used to plan and delete them (B's and C's checkpoints then failed to restore
with FileNotFoundException). Now A's directory is ownerless: held back, named with its files and bytes,
nothing in it planned, until a run over both roots says `--roots-complete`, which deletes exactly what
Flink's own reading says no `_metadata` references. Afterwards every job's newest checkpoint restores
in real Flink, in one JVM. Ground truth for "referenced" is the harness oracle, not our index.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import Warehouse
from tests.chains.support import oracle_references
from tests.gc.support import (SHORT, Pipeline, actions, listing, local, relocated, rewrite_keeping_mtime, runs,
                              split_old_job, uri)

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


@pytest.fixture(scope="module")
def split(flink_fixture, tmp_path_factory) -> dict:
    fx = flink_fixture(VERSION, "chain_claim")
    base = tmp_path_factory.mktemp("gc-split")
    store = local(relocated(fx, base / "deployB"))
    a_id = fx.job("A")["job_id"]
    a_old, a_new = store / "checkpoints" / a_id, base / "deployA" / "checkpoints" / a_id
    a_new.parent.mkdir(parents=True)
    shutil.move(a_old, a_new)
    for metadata in sorted(store.rglob("_metadata")):
        rewrite_keeping_mtime(metadata, {uri(a_old): uri(a_new)})
    # Flink's default num-retained 1 subsumes A's chk-2 and chk-3; B (CLAIM) deletes the restored chk-4.
    for chk in sorted(a_new.glob("chk-*")):
        shutil.rmtree(chk)
    roots_a = [uri(base / "deployA" / "checkpoints")]
    roots_b = [uri(store / "checkpoints")]
    metadata = sorted(store.rglob("_metadata"))
    referenced = {f for files in oracle_references(VERSION, metadata).values() for f in files}
    a_files = {u for u in listing(roots_a) if u.startswith(uri(a_new) + "/")}
    a_used = a_files & referenced
    assert a_used, f"B and C reference nothing of A's {a_new}: the scenario no longer fits this test"
    return {"fx": fx, "base": base, "store": store, "a_dir": a_new, "roots_a": roots_a, "roots_b": roots_b,
            "referenced": referenced, "a_files": a_files, "a_used": a_used}


def _gc_over(spark, split: dict, roots: list[str], name: str, *args: str) -> tuple[Pipeline, int, dict]:
    p = Pipeline(spark, Warehouse(str(split["base"] / f"warehouse-{name}")), roots, split["base"])
    p.refresh()
    code, result = p.gc("--mode", "delete", *SHORT, *args, name=name)
    return p, code, result


@pytest.fixture(scope="module")
def over_one_root(spark, split):
    before = listing(split["roots_a"])
    p, code, result = _gc_over(spark, split, split["roots_a"], "one-root")
    return p, code, result, before, listing(split["roots_a"])


def test_gc_over_one_root_deletes_nothing_the_other_roots_jobs_use(split, over_one_root):
    p, code, result, before, after = over_one_root
    assert code == 0, result
    assert split["a_used"] <= set(after), sorted(split["a_used"] - set(after))[:5]
    assert before == after, sorted(set(before) - set(after))[:5]        # A is ownerless: nothing of it planned
    assert result["planned"] == 0 and result["deleted"] == 0, result


def test_the_ownerless_directory_is_named_with_its_bytes(split, over_one_root):
    p, code, result, before, _ = over_one_root
    a_dir = split["a_dir"].name
    [held] = [d for d in result["ownerless"] if d["job_dir"] == a_dir]
    assert held["verdict"] == "held_back" and held["files"] == len(split["a_files"]), held
    assert held["bytes"] == sum(before[u] for u in split["a_files"]), held
    newest = _newest_row(p, result)
    assert [(d["job_dir"], d["verdict"]) for d in newest["ownerless"]] == [(a_dir, "held_back")], newest
    assert not actions(p.warehouse, result["run_id"])


@pytest.fixture(scope="module")
def over_every_root(spark, split, over_one_root):
    roots = split["roots_a"] + split["roots_b"]
    before = listing(roots)
    # Both roots without the declaration: A still has no snapshot of its own, so it stays held back.
    _, held_code, held = _gc_over(spark, split, roots, "both", "--mode", "plan")
    # Declared complete: the sweep judges A like any other directory.
    p, code, result = _gc_over(spark, split, roots, "complete", "--roots-complete")
    return {"before": before, "after": listing(roots), "held": (held_code, held), "pipeline": p, "code": code,
            "result": result}


def test_over_every_root_ownerless_stays_held_back_without_the_declaration(split, over_every_root):
    code, held = over_every_root["held"]
    assert code == 0 and [d["verdict"] for d in held["ownerless"]] == ["held_back"], held
    assert not {r["uri"] for r in actions(_warehouse(split, "both"), held["run_id"])} & split["a_files"]


def test_over_every_root_roots_complete_deletes_exactly_the_unreferenced(split, over_every_root):
    c = over_every_root
    before, after, result = c["before"], c["after"], c["result"]
    assert c["code"] == 0, result
    metadata = {u for u in before if u.endswith("/_metadata")}
    expected = set(before) - split["referenced"] - metadata
    assert set(before) - set(after) == expected, (sorted(set(before) - set(after) - expected)[:5],
                                                  sorted(expected - (set(before) - set(after)))[:5])
    assert split["a_files"] - split["a_used"] <= expected       # A's own dead files are among them
    assert [d["verdict"] for d in result["ownerless"]] == ["roots_complete"], result
    newest = _newest_row(c["pipeline"], result)
    assert '"roots_complete": true' in newest["options"], newest["options"]


def _newest_row(p: Pipeline, result: dict) -> dict:
    """The run's newest gc_runs row (its state: the table is an event log)."""
    return max((r for r in runs(p.warehouse) if r["run_id"] == result["run_id"]), key=lambda r: r["finished_at"])


def _warehouse(split: dict, name: str) -> Warehouse:
    return Warehouse(str(split["base"] / f"warehouse-{name}"))


# -- the twin: the old job still retains older checkpoints (issue 73) --------------------------------------
#
# The same hand-over, but A ran with `num-retained` above 1: B's CLAIM deleted only the restored chk-4, A's
# chk-2 and chk-3 remain, so A's directory has snapshots and is not ownerless. The files only chk-4 named
# (B, B_legacy and C read them) are unreferenced under deployA; GC over deployA alone, with a retention
# policy people set (--inactive-after), used to delete them. They were written after A's newest retained
# `_metadata` (chk-3's) and no failed checkpoint explains them: A's tail, held back and named.


@pytest.fixture(scope="module")
def twin(flink_fixture, spark, tmp_path_factory) -> dict:
    fx = flink_fixture(VERSION, "chain_claim")
    base = tmp_path_factory.mktemp("gc-twin")
    store, a_new = split_old_job(fx, base)
    claimed = a_new / Path(fx.job("B")["restored_from"]).name
    assert claimed.is_dir() and sorted(a_new.glob("chk-*"))[:-1], "A retains no older checkpoint: the twin needs it"
    shutil.rmtree(claimed)                       # B subsumed the checkpoint it claimed: Flink deleted it
    roots_a = [uri(base / "deployA" / "checkpoints")]
    a_metadata = sorted(a_new.rglob("_metadata"))
    metadata = sorted(store.rglob("_metadata")) + a_metadata
    readings = oracle_references(VERSION, metadata)
    referenced = {f for files in readings.values() for f in files}
    by_a = {f for m in a_metadata for f in readings[uri(m)]}
    # --inactive-after keeps A's newest retained checkpoint only (--inactive-retain 1): what it names must stay
    by_a_newest = set(readings[uri(max(a_metadata, key=lambda m: int(m.parent.name[4:])))])
    a_files = {u for u in listing(roots_a) if u.startswith(uri(a_new) + "/")}
    only_claimed = (a_files & referenced) - by_a
    assert only_claimed, "no file of A is used by the other root's jobs alone: the twin no longer fits this test"
    p = Pipeline(spark, Warehouse(str(base / "warehouse")), roots_a, base)
    p.refresh()
    before = listing(roots_a)
    code, result = p.gc("--mode", "delete", "--inactive-after", "1s", *SHORT, name="twin")
    return {"fx": fx, "store": store, "a_dir": a_new, "only_claimed": only_claimed, "by_a_newest": by_a_newest,
            "before": before, "after": listing(roots_a), "code": code, "result": result, "pipeline": p}


def test_twin_gc_over_the_old_root_keeps_what_only_the_claimed_checkpoint_named(twin):
    assert twin["code"] == 0, twin["result"]
    gone = set(twin["before"]) - set(twin["after"])
    assert not gone & twin["only_claimed"], sorted(gone & twin["only_claimed"])[:5]
    assert not gone & twin["by_a_newest"], sorted(gone & twin["by_a_newest"])[:5]


def test_twin_the_held_back_tail_is_named_in_the_result_and_gc_runs(twin):
    result, a_dir = twin["result"], twin["a_dir"].name
    [tail] = [t for t in result["claimable"] if t["job_dir"] == a_dir]
    assert tail["verdict"] == "held_back" and tail["files"] >= len(twin["only_claimed"]), tail
    assert tail["bytes"] >= sum(twin["before"][u] for u in twin["only_claimed"]), tail
    assert not result["ownerless"], result["ownerless"]            # A has snapshots: not ownerless
    newest = _newest_row(twin["pipeline"], result)
    assert [(t["job_dir"], t["verdict"]) for t in newest["claimable"]] == [(a_dir, "held_back")], newest
    planned = {r["uri"] for r in actions(twin["pipeline"].warehouse, result["run_id"])}
    assert not planned & twin["only_claimed"], sorted(planned & twin["only_claimed"])[:5]


def test_every_jobs_newest_checkpoint_restores_after_both_gcs(split, over_one_root, over_every_root, twin):
    fx, store = split["fx"], split["store"]
    cases = []
    for name in ("B", "B_legacy", "C"):
        newest = max((store / "checkpoints" / fx.job(name)["job_id"]).glob("chk-*"), key=lambda d: int(d.name[4:]))
        cases.append((newest, "chain_claim", name))
    # the twin: B, B_legacy and C read A's held-back tail; A's newest retained checkpoint still restores too
    for name in ("B", "B_legacy", "C"):
        newest = max((twin["store"] / "checkpoints" / fx.job(name)["job_id"]).glob("chk-*"),
                     key=lambda d: int(d.name[4:]))
        cases.append((newest, "chain_claim", name))
    cases.append((max(twin["a_dir"].glob("chk-*"), key=lambda d: int(d.name[4:])), "chain_claim", "A"))
    results = harness.verify_restore_many(VERSION, cases)
    failed = [(str(case[0]), r.output[-2000:]) for case, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed
