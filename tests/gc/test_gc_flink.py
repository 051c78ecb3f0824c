"""GC on real Flink stores: it deletes exactly what no remaining `_metadata` references, and every
snapshot that must survive still restores in real Flink.

Per Flink version, relocated copies of every scenario's cached store (absolute paths rewritten into
the copy; the read-only cache is never touched) share one warehouse: one index run, one chains run
and one deleting GC run (grace shortened to 1 s) over all of them. Ground truth is Flink's own
loader (the harness oracle) over the copies' `_metadata` plus the listing: expected deletions =
every listed file that no `_metadata` references and that is not a `_metadata` itself. Afterwards
the restore verifier (one JVM per version) restores, in `make test`, every job's oldest and newest
retained checkpoint and every savepoint of every scenario; with --full-matrix every retained
checkpoint and savepoint of the newest version (STATEKEEPER_GC_VERIFY=all: of every version).
"""
from __future__ import annotations

import os

import pytest

import tests.harness as harness
from tests.chains.support import oracle_references
from tests.gc.support import SHORT, actions, listing, local, pipeline, relocated, retained_cases, uri
from tests.plugins.flink import matrix_versions

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module", params=matrix_versions())
def collected(request, spark, flink_fixture, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"gc-{version}")
    fixtures = {s: flink_fixture(version, s) for s in harness.scenarios_for(version)}
    copies = {s: relocated(fx, base / s) for s, fx in fixtures.items()}
    p = pipeline(spark, base, list(copies.values()))
    before = listing(p.roots)
    metadata = sorted(u for u in before if u.endswith("/_metadata"))
    truth = oracle_references(version, [local(m) for m in metadata])
    referenced = {f for files in truth.values() for f in files}
    p.refresh()
    code, result = p.gc("--mode", "delete", *SHORT)
    after = listing(p.roots)
    return {"version": version, "fixtures": fixtures, "copies": copies, "pipeline": p, "before": before,
            "after": after, "referenced": referenced, "metadata": set(metadata), "code": code, "result": result}


def test_deletes_exactly_what_nothing_references(collected):
    c = collected
    assert c["code"] == 0, c["result"].get("blocked") or c["result"]
    expected = set(c["before"]) - c["referenced"] - c["metadata"]
    deleted = set(c["before"]) - set(c["after"])
    assert deleted == expected, (sorted(deleted - expected)[:10], sorted(expected - deleted)[:10])
    assert c["referenced"] & set(c["before"]) <= set(c["after"])     # nothing referenced is gone
    # the planted garbage of failed_and_orphans is among it, each with its reason
    fx, copy = c["fixtures"]["failed_and_orphans"], c["copies"]["failed_and_orphans"]
    moved = lambda p: copy + uri(p)[len(uri(fx.root)):]   # noqa: E731
    orphans = {moved(f) for f in fx.manifest["orphan_files"]}
    assert orphans and orphans <= deleted
    rows = {r["uri"]: r for r in actions(c["pipeline"].warehouse, c["result"]["run_id"])}
    assert {rows[o]["reason"] for o in orphans} == {"orphan"}
    failed = {rows[u]["reason"] for u in deleted if "/chk-" in u and u in rows}
    assert {"failed_checkpoint", "inprogress"} <= failed
    assert all(rows[u]["outcome"] == "deleted" for u in deleted)
    assert c["result"]["deleted"] == len(deleted) and c["result"]["failed"] == 0


def test_every_retained_checkpoint_and_savepoint_restores(collected, pytestconfig):
    c = collected
    cases = [case for s, fx in c["fixtures"].items() for case in retained_cases(fx, c["copies"][s])]
    everything = os.environ.get("STATEKEEPER_GC_VERIFY") == "all" or (
        pytestconfig.getoption("--full-matrix") and c["version"] == harness.FLINK_VERSIONS[-1])
    if not everything:
        # CI time (make test, and the older versions, which only --full-matrix runs). GC deletes data, so
        # this subset is the one its mistakes would break: every job's OLDEST retained checkpoint (its closure
        # reaches furthest back into shared/, the files GC is likeliest to delete wrongly), every job's
        # newest, and every savepoint. That no file any retained `_metadata` references is gone is proven
        # for all of them against Flink's reading by test_deletes_exactly_what_nothing_references.
        # --full-matrix (STATEKEEPER_FULL_MATRIX=1) restores all of the newest version's,
        # STATEKEEPER_GC_VERIFY=all all of every version's.
        checkpoints: dict[tuple[str, str], list] = {}
        for case in cases:
            if case[0].name.startswith("chk-"):
                checkpoints.setdefault((case[1], case[2]), []).append(case)
        ends = []
        for chks in checkpoints.values():
            chks.sort(key=lambda case: int(case[0].name[4:]))
            ends += [chks[0]] if len(chks) == 1 else [chks[0], chks[-1]]
        cases = ends + [case for case in cases if not case[0].name.startswith("chk-")]
    results = harness.verify_restore_many(c["version"], cases)
    failed = [(str(case[0]), r.output[-2000:]) for case, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed
