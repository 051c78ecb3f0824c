"""Compaction of real Flink checkpoints, on every harness Flink version, proven by restore.

Per version, relocated copies of `inline_heavy` (job A: everything inline at the 1 MiB threshold; B:
threshold 0, nothing movable) and `incremental_inline` (RocksDB incremental at the 1 MiB threshold)
share one warehouse: index, chains and validate, a dry run, then one compaction run selecting every
`_metadata` over 256 KiB into new `compacted/chk-N/` directories. Then index -> chains -> GC (plan)
must keep every new file, a second run finds nothing to do, and the restore verifier restores the newest
compacted snapshot of each scenario in one JVM per version (every compacted snapshot under the full matrix).
"""
from __future__ import annotations

import pytest

import tests.harness as harness
from tests.compact.support import compact_pipeline, compactions, listing, local, relocated, sha256, table, uri
from tests.plugins.flink import matrix_versions

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

SCENARIOS = ("inline_heavy", "incremental_inline")
SHORT = ["--older-than", "1s", "--allow-short-grace"]


@pytest.fixture(scope="module", params=matrix_versions())
def compacted(request, spark, flink_fixture, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"compact-{version}")
    fixtures = {s: flink_fixture(version, s) for s in SCENARIOS}
    sources = {s: relocated(fx, base / "src" / s) for s, fx in fixtures.items()}
    roots = [r for s in SCENARIOS for r in (f"{sources[s]}/checkpoints", f"{sources[s]}/savepoints")]
    p = compact_pipeline(spark, base, roots)
    p.prepare()
    before = listing(roots)
    metadata = {u: sha256(local(u)) for u in before if u.endswith("/_metadata")}
    dry = p.compact("--max-metadata-size", "256KiB", "--dry-run")
    after_dry = listing(roots)
    code, result = p.compact("--max-metadata-size", "256KiB")
    return {"version": version, "base": base, "fixtures": fixtures, "sources": sources, "roots": roots,
            "pipeline": p, "code": code, "result": result, "dry": dry, "before": before, "after_dry": after_dry,
            "metadata": metadata}


def _rows(c):
    return compactions(c["pipeline"].warehouse, c["result"]["run_id"])


def test_dry_run_writes_nothing_and_plans_what_the_run_does(compacted):
    c = compacted
    code, dry = c["dry"]
    assert code == 0, dry
    assert c["after_dry"] == c["before"]
    planned = compactions(c["pipeline"].warehouse, dry["run_id"])
    assert planned and {r["status"] for r in planned} == {"planned"}
    done = {r["source_metadata_uri"]: r for r in _rows(c)}
    for r in planned:
        assert r["metadata_bytes_after"] == done[r["source_metadata_uri"]]["metadata_bytes_after"]
        assert r["files_written"] == done[r["source_metadata_uri"]]["files_written"]


def test_selected_metadata_shrink_and_sources_stay_untouched(compacted):
    c = compacted
    assert c["code"] == 0, c["result"]
    r = c["result"]
    rows = _rows(c)
    heavy = [x for x in rows if "/inline_heavy/" in x["source_metadata_uri"]]
    incremental = [x for x in rows if "/incremental_inline/" in x["source_metadata_uri"]]
    # inline_heavy: A's 3 retained checkpoints (B's _metadata are small); incremental_inline: its retained ones
    assert len(heavy) == 3 and len(incremental) == 3, [x["source_metadata_uri"] for x in rows]
    assert r["compacted"] == r["selected"] == 6 and r["failed"] == 0
    for x in rows:
        assert x["status"] == "compacted", x
        src, out = local(x["source_metadata_uri"]), local(x["result_metadata_uri"])
        assert out.parent.parent.name == "compacted" and out.parent.name == src.parent.name
        assert out.stat().st_size == x["metadata_bytes_after"] < x["metadata_bytes_before"] == src.stat().st_size
        assert sha256(src) == c["metadata"][x["source_metadata_uri"]]    # the source is never modified
        moved = [p for p in out.parent.iterdir() if p.name != "_metadata"]
        assert len(moved) == x["files_written"] > 0
        assert sum(p.stat().st_size for p in moved) == x["bytes_written"]
    for x in heavy:
        shrink = 1 - x["metadata_bytes_after"] / x["metadata_bytes_before"]
        print(f"{c['version']} inline_heavy {x['source_metadata_uri'].rsplit('/', 2)[1]}: _metadata "
              f"{x['metadata_bytes_before']} -> {x['metadata_bytes_after']} bytes ({shrink:.1%} smaller)")
        assert shrink >= 0.90
    # no temporary candidate is left behind
    assert not [u for u in listing(c["roots"]) if "statekeeper-" in u]


def test_report_names_the_operators_holding_inline_state(compacted):
    report = compacted["result"]["report"]
    assert report and report == sorted(report, key=lambda r: -r["inline_bytes"])
    top = report[0]
    assert top["inline_bytes"] >= top["movable_bytes"] > 0 and top["snapshots"] >= 1 and top["handle_count"] > 0
    assert all(len(r["operator_id"]) == 32 for r in report)
    if harness.metadata_version_for(compacted["version"]) >= 5:    # V5+ store operator uids
        assert top["operator_uid"] == "keyed-invariant"


def test_index_chains_and_gc_keep_every_new_file(compacted):
    c = compacted
    p = c["pipeline"]
    p.refresh()
    rows = _rows(c)
    new_files = {u for u in listing(c["roots"]) if "/compacted/" in u}
    assert len(new_files) == sum(x["files_written"] + 1 for x in rows)
    snaps = {s["uri"]: s for s in table(p.warehouse, "snapshots")}
    for x in rows:
        assert snaps[x["result_metadata_uri"]]["status"] == "ok"
    refs = {r["file_uri"] for r in table(p.warehouse, "references")}
    assert {u for u in new_files if not u.endswith("/_metadata")} <= refs
    code, gc = p.gc(*SHORT)
    assert code == 0, gc
    from tests.gc.support import actions

    planned = {a["uri"] for a in actions(p.warehouse, gc["run_id"])}
    assert not planned & new_files
    assert not {u for u in c["metadata"]} & planned      # nor any source `_metadata`


def test_warehouse_maintenance_through_the_entry_point(compacted):
    """spark_jobs/maintain_warehouse.py (a job of its own; compact_checkpoints --maintain-warehouse before): a
    retention that would vacuum what a pinned reader needs is refused (exit 2, nothing changed); a dry run
    reports; a real run compacts the small files the runs above left. The tests after this one read the
    maintained warehouse."""
    import json

    from spark_jobs.maintain_warehouse import main

    p = compacted["pipeline"]

    def maintain(*args: str) -> tuple[int, dict]:
        out = p.base / f"maintain-{len(list(p.base.glob('maintain-*.json')))}.json"
        code = main(["--warehouse", p.warehouse.uri, "--progress-interval", "0", "--result-json", str(out), *args])
        return code, (json.loads(out.read_text()) if out.exists() else {})

    code, refused = maintain("--warehouse-retention", "0s")
    assert code == 2 and "RetentionFloorError" in refused["error"], refused
    code, planned = maintain("--dry-run")
    assert code == 0 and planned["mode"] == "dry_run", planned
    assert planned["files_compacted"] > 0
    code, report = maintain()
    assert code == 0, report
    # the refused run's and the dry run's own audit rows are maintenance_runs' two small files
    assert report["mode"] == "maintain" and report["files_compacted"] == planned["files_compacted"] + 2
    assert report["files_after"] < report["files_before"]
    runs = {r["run_id"]: r for r in table(p.warehouse, "maintenance_runs")}
    assert runs[report["run_id"]]["mode"] == "maintain" and runs[report["run_id"]]["tables"]


def test_a_second_run_finds_nothing_to_do(compacted):
    c = compacted
    p = c["pipeline"]
    assert p.validate() == 0
    before = listing(c["roots"])
    code, again = p.compact("--max-metadata-size", "256KiB")
    assert code == 0, again
    assert again["selected"] == 0 and listing(c["roots"]) == before


# A scenario's compacted snapshots are one job's retained checkpoints, planned, written and verified by the same
# code (the same handle kinds, only more or fewer of them): the newest of each restores in `make test`, the
# older ones under the full matrix.
@pytest.mark.parametrize("which", ["newest", pytest.param("older", marks=pytest.mark.full_matrix)])
def test_compacted_snapshots_restore(compacted, which):
    c = compacted
    newest = {uri(local(c["sources"][s]) / fx.retained_checkpoints("A")[-1].relative_to(fx.root) / "_metadata")
              for s, fx in c["fixtures"].items()}
    rows = [x for x in _rows(c) if (x["source_metadata_uri"] in newest) == (which == "newest")]
    assert len(rows) == (len(SCENARIOS) if which == "newest" else len(_rows(c)) - len(SCENARIOS)), rows
    cases = []
    for x in rows:
        scenario = "inline_heavy" if "/inline_heavy/" in x["source_metadata_uri"] else "incremental_inline"
        cases.append(harness.VerifyCase(local(x["result_metadata_uri"]).parent, scenario, "A"))
    results = harness.verify_restore_many(c["version"], cases)
    bad = [(case.snapshot_dir, r.output[-2000:]) for case, r in zip(cases, results) if not r.ok]
    assert not bad, bad
