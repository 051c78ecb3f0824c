"""GC of one root never deletes the ForSt database a job in another root reads (issue 73, the critical case).

The cached `forst` store: job A runs ForSt with its database in checkpoint storage, fails over once (every
subtask has `attempt_0` and `attempt_1`), retains chk-3 and chk-4; B is restored in CLAIM mode from A's
newest, chk-5, and Flink deleted chk-5 once B subsumed it. Here B lives in another root (one root per
deployment): A's job directory under `deployA/checkpoints`, B under `deployB/checkpoints`, every `_metadata`
rewritten to the new places, every file keeping the time Flink wrote it, A's files backdated three days.

GC over `deployA` alone with `--inactive-after 2d` (a retention option people set) judged every database of
A dead (`job_inactive`) and deleted the files of A's newest database that only chk-5 named, which B reads:
B's newest checkpoint then failed to restore (FileNotFoundException under `deployA/.../attempt_1/db/`). Now
the newest attempt's database is judged dead by inactivity only when the run declares its roots complete,
and the files written after A's newest retained checkpoint are A's tail, held back and named. Afterwards B's
newest and A's newest retained checkpoint restore in real Flink, in one JVM.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import Warehouse
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, Pipeline, actions, listing, split_old_job, uri

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
THREE_DAYS_NS = 3 * 86400 * 10**9


def _backdate(directory: Path, ns: int) -> None:
    """Move every file's time `ns` into the past, keeping the order Flink wrote them in."""
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns - ns, st.st_mtime_ns - ns))


@pytest.fixture(scope="module")
def split(flink_fixture, spark, tmp_path_factory) -> dict:
    fx = flink_fixture(VERSION, "forst")
    base = tmp_path_factory.mktemp("forst-split")
    store, a_new = split_old_job(fx, base)
    claimed = a_new / Path(fx.job("B")["restored_from"]).name
    assert not claimed.exists() and list(a_new.glob("chk-*/_metadata")), \
        "the forst store no longer has A retaining older checkpoints after B's CLAIM deleted chk-5"
    _backdate(a_new, THREE_DAYS_NS)
    b_metadata = sorted(store.rglob("_metadata"))
    a_metadata = sorted(a_new.rglob("_metadata"))
    readings = oracle_references(VERSION, b_metadata + a_metadata)
    by_b = {f for m in b_metadata for f in readings[uri(m)] if f.startswith(uri(a_new) + "/")}
    by_a = {f for m in a_metadata for f in readings[uri(m)]}
    b_only = by_b - by_a
    # --inactive-after 2d keeps A's newest checkpoint only (--inactive-retain 1): what it names must stay
    by_a_newest = set(readings[uri(max(a_metadata, key=lambda m: int(m.parent.name[4:])))])
    assert any("/db/" in f for f in b_only), "B reads no file of A's databases that A's own checkpoints do not"
    roots_a = [uri(base / "deployA" / "checkpoints")]
    p = Pipeline(spark, Warehouse(str(base / "warehouse")), roots_a, base)
    p.refresh()
    before = listing(roots_a)
    code, result = p.gc("--mode", "delete", "--inactive-after", "2d", *SHORT, name="gc-a")
    return {"fx": fx, "store": store, "a_dir": a_new, "b_only": b_only, "by_a_newest": by_a_newest, "before": before,
            "after": listing(roots_a), "code": code, "result": result, "pipeline": p}


def test_gc_of_the_old_root_keeps_every_file_the_other_roots_job_reads(split):
    assert split["code"] == 0, split["result"]
    gone = set(split["before"]) - set(split["after"])
    assert not gone & split["b_only"], sorted(gone & split["b_only"])[:5]
    assert not gone & split["by_a_newest"], sorted(gone & split["by_a_newest"])[:5]
    planned = {r["uri"] for r in actions(split["pipeline"].warehouse, split["result"]["run_id"])}
    assert not planned & split["b_only"], sorted(planned & split["b_only"])[:5]


def test_the_newest_database_is_not_dead_by_inactivity_and_the_tail_is_named(split):
    result, a_dir = split["result"], split["a_dir"].name
    assert not result["ownerless"], result["ownerless"]              # A has snapshots: not ownerless
    [tail] = [t for t in result["claimable"] if t["job_dir"] == a_dir]
    assert tail["verdict"] == "held_back" and tail["files"] > 0, tail
    [forst] = [f for f in result["forst"] if f["job_dir"] == a_dir]
    # only the superseded attempt_0 databases are dead; the attempt_1 ones are left alone and counted
    assert 0 < forst["dead_databases"] < forst["databases"], forst
    assert forst["unjudged_files"] > 0, forst
    planned = actions(split["pipeline"].warehouse, result["run_id"])
    assert not [r["uri"] for r in planned if "_attempt_1/db/" in r["uri"]], planned[:3]


def test_the_other_roots_newest_and_the_old_jobs_newest_retained_checkpoint_restore(split):
    fx = split["fx"]
    b_newest = max((split["store"] / "checkpoints" / fx.job("B")["job_id"]).glob("chk-*"),
                   key=lambda d: int(d.name[4:]))
    a_newest = max(split["a_dir"].glob("chk-*"), key=lambda d: int(d.name[4:]))
    results = harness.verify_restore_many(VERSION, [harness.VerifyCase(b_newest, "forst", "B"),
                                                    harness.VerifyCase(a_newest, "forst", "A")])
    failed = [r.output[-2000:] for r in results if not r.ok]
    assert not failed, failed
