"""GC on real Flink stores: it deletes exactly what no remaining `_metadata` references, and every
snapshot that must survive still restores in real Flink.

Per Flink version, relocated copies of every scenario's cached store (absolute paths rewritten into
the copy; the read-only cache is never touched) share one warehouse: one index run, one chains run
and one deleting GC run (grace shortened to 1 s) over all of them. Ground truth is Flink's own
loader (the harness oracle) over the copies' `_metadata` plus the listing: expected deletions =
every listed file that no `_metadata` references and that is not a `_metadata` itself. Afterwards
the restore verifier restores every retained checkpoint and savepoint of every scenario (one JVM
per version for all of them).
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


def test_every_retained_checkpoint_and_savepoint_restores(collected):
    c = collected
    cases = [case for s, fx in c["fixtures"].items() for case in retained_cases(fx, c["copies"][s])]
    if os.environ.get("STATEKEEPER_GC_VERIFY") != "all" and c["version"] != harness.FLINK_VERSIONS[-1]:
        # CI time: older versions restore each job's newest retained checkpoint and every savepoint
        # (STATEKEEPER_GC_VERIFY=all restores everything on every version).
        newest = {}
        for path, scenario, job in cases:
            if path.name.startswith("chk-"):
                key = (scenario, job)
                if key not in newest or int(path.name[4:]) > int(newest[key][0].name[4:]):
                    newest[key] = (path, scenario, job)
        cases = list(newest.values()) + [case for case in cases if not case[0].name.startswith("chk-")]
    results = harness.verify_restore_many(c["version"], cases)
    failed = [(str(case[0]), r.output[-2000:]) for case, r in zip(cases, results, strict=True) if not r.ok]
    assert not failed, failed
