"""The report of real Flink stores (restore chain, savepoints, failed checkpoints and orphans): its
numbers equal what the tables say, computed here independently from the tables' rows in Python.

One warehouse over private copies of the three 2.3.0 sample stores (mtimes moved 10 days back, so
GC's grace period lets its plan include the orphans): index, chains, validate, GC (plan), report.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

from statekeeper.report.store import ReportStore
from statekeeper.tables.warehouse import Warehouse
from tests.chains.support import relocate_store, store_roots
from tests.index.support import run_index, table_rows

VERSION = "2.3.0"
STORES = ("chain_claim", "savepoints", "failed_and_orphans")


def _age(root: Path, days: float) -> None:
    then = time.time() - days * 86400
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.utime(Path(dirpath) / name, (then, then), follow_symlinks=False)


@pytest.fixture(scope="module")
def reported(spark, flink_fixture, tmp_path_factory):
    from spark_jobs.collect_garbage import main as gc_main
    from spark_jobs.compute_chains import main as chains_main
    from spark_jobs.validate_checkpoints import main as validate_main
    from statekeeper.report.job import BuildReport
    from statekeeper.report.options import ReportOptions

    base = tmp_path_factory.mktemp("report")
    fixtures = {name: flink_fixture(VERSION, name) for name in STORES}
    roots = []
    for name, fx in fixtures.items():
        copy = relocate_store(fx.root, str(base / name))
        _age(Path(copy[len("file://"):]), 10)
        roots += [r for r in store_roots(copy) if Path(r[len("file://"):]).is_dir()]
    warehouse = Warehouse(str(base / "warehouse"))
    assert run_index(spark, roots, warehouse).status == "succeeded"
    common = ["--warehouse", warehouse.uri, "--progress-interval", "0"]
    assert chains_main(common) == 0
    assert validate_main([*common, "--no-quality-suite"]) == 0
    assert gc_main([*common, "--older-than", "1d"]) == 0
    result = (BuildReport(spark).warehouse(warehouse.uri).progress_interval(0)
              .configure(ReportOptions(out=str(base / "out"))).execute())
    ref, page = ReportStore(warehouse).page(None)
    data = json.loads((base / "out" / "report.json").read_text())
    return {"fixtures": fixtures, "warehouse": warehouse, "result": result, "ref": ref, "page": page.decode(),
            "data": data, "base": base}


def rows(reported, name):
    return table_rows(reported["warehouse"], name)


def test_published_and_pointed_at(reported):
    result, ref = reported["result"], reported["ref"]
    assert result.status == "succeeded" and result.report_uri == ref.page_uri
    assert ref.run_id == result.run_id
    # the local copy is the same page, and the page needs nothing from the network
    assert (reported["base"] / "out" / "index.html").read_text() == reported["page"]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", reported["page"]), "the page fetches something"
    assert "<script" not in reported["page"]
    audit = [r for r in rows(reported, "report_runs") if r["run_id"] == result.run_id]
    assert len(audit) == 1 and audit[0]["report_uri"] == ref.page_uri and audit[0]["status"] == "succeeded"


def test_storage_per_directory_equals_the_tables(reported):
    data = reported["data"]
    files = rows(reported, "files")
    by_dir: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    size = {}
    for f in files:
        by_dir[(f["root"], f["job_dir"])][0] += 1
        by_dir[(f["root"], f["job_dir"])][1] += f["size"]
        size[f["uri"]] = f["size"]
    # pinned: distinct files of a directory that another directory's snapshots reference
    pinned: dict[tuple, set] = defaultdict(set)
    for r in rows(reported, "references"):
        if r["file_root"] is not None and (r["file_root"], r["file_job_dir"]) != (r["root"], r["job_dir"]) \
                and r["file_uri"] in size:
            pinned[(r["file_root"], r["file_job_dir"])].add(r["file_uri"])
    inline: dict[tuple, int] = defaultdict(int)
    for s in rows(reported, "snapshots"):
        inline[(s["root"], s["job_dir"])] += s["inline_bytes"] or 0
    gc_run = data["gc"]["plan_run_id"]
    reclaim: dict[tuple, int] = defaultdict(int)
    for a in rows(reported, "gc_actions"):
        if a["run_id"] == gc_run and a["outcome"] == "planned":
            reclaim[(a["root"], a["job_dir"])] += a["size"]

    shown = {(r["root"], r["job_dir"]): r for r in data["storage"]}
    assert set(shown) == set(by_dir), "every directory of these small stores is shown"
    for key, r in shown.items():
        assert (r["files"], r["total_bytes"]) == tuple(by_dir[key]), key
        assert r["pinned_bytes"] == sum(size[u] for u in pinned[key]) and r["pinned_files"] == len(pinned[key]), key
        assert r["inline_bytes"] == inline[key], key
        assert r["reclaimable_bytes"] == reclaim[key], key
        assert r["own_bytes"] == r["total_bytes"] - r["pinned_bytes"] - r["reclaimable_bytes"], key
    totals = data["totals"]
    assert totals["total_bytes"] == sum(v[1] for v in by_dir.values())
    assert totals["files"] == len(files) and totals["directories"] == len(by_dir)
    assert totals["pinned_bytes"] == sum(size[u] for s in pinned.values() for u in s) > 0
    assert totals["reclaimable_bytes"] == sum(reclaim.values()) > 0, "the orphans are planned"

    # the chain: B and C keep A's files alive
    chain = reported["fixtures"]["chain_claim"]
    job_a = Path(chain.job("A")["job_dir"]).name
    assert [r["pinned_bytes"] > 0 for k, r in shown.items() if k[1] == job_a] == [True]


def test_lineage_edges_equal_the_references(reported):
    data = reported["data"]
    size = {f["uri"]: f["size"] for f in rows(reported, "files")}
    edges: dict[tuple, set] = defaultdict(set)
    for r in rows(reported, "references"):
        if r["file_root"] is not None and (r["file_root"], r["file_job_dir"]) != (r["root"], r["job_dir"]) \
                and r["file_uri"] in size:
            edges[(r["root"], r["job_dir"], r["file_root"], r["file_job_dir"])].add(r["file_uri"])
    got = {(e["root"], e["job_dir"], e["target_root"], e["target_job_dir"]): (e["files"], e["bytes"])
           for e in data["lineage_edges"]}
    assert got == {k: (len(v), sum(size[u] for u in v)) for k, v in edges.items()}
    assert data["lineage_edge_count"] == len(edges)

    chain = reported["fixtures"]["chain_claim"]
    a, b, c = (Path(chain.job(n)["job_dir"]).name for n in "ABC")
    pairs = {(k[1], k[3]) for k in got}
    assert {(b, a), (c, b)} <= pairs or {(b, a), (c, a)} <= pairs, pairs
    page = reported["page"]
    for job_dir in (a, b, c):   # the graph's nodes, as the browser test finds them
        assert re.search(rf'<g id="sknode\d+" class="node" data-job-dir="{job_dir}"[^>]*data-restorable="true"', page)


def test_restorable_flags_equal_validation(reported):
    data = reported["data"]
    jobs = rows(reported, "validation_jobs")
    assert {(h["root"], h["job_dir"]): h["newest_restorable"] for h in data["health"]} == \
        {(j["root"], j["job_dir"]): j["newest_restorable"] for j in jobs}
    assert data["jobs"] == len(jobs)
    assert data["jobs_unrestorable"] == 0 and all(h["newest_restorable"] for h in data["health"])
    for h in data["health"]:
        j = next(j for j in jobs if (j["root"], j["job_dir"]) == (h["root"], h["job_dir"]))
        assert (h["newest_uri"], h["latest_restorable_checkpoint_id"]) == \
            (j["newest_uri"], j["latest_restorable_checkpoint_id"])
        assert re.search(rf'<tr data-job-dir="{re.escape(h["job_dir"])}" data-restorable="true"', reported["page"])


def test_gc_counts_equal_the_plan(reported):
    gc = reported["data"]["gc"]
    runs = [r for r in rows(reported, "gc_runs") if r["run_id"] == gc["run_id"]]
    newest = max(runs, key=lambda r: r["finished_at"])
    assert (gc["status"], gc["mode"], gc["planned"], gc["planned_bytes"], gc["deleted"]) == \
        (newest["status"], "plan", newest["planned"], newest["planned_bytes"], 0)
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for a in rows(reported, "gc_actions"):
        if a["run_id"] == gc["plan_run_id"]:
            counts[(a["reason"], a["outcome"])][0] += 1
            counts[(a["reason"], a["outcome"])][1] += a["size"]
    assert {(o["reason"], o["outcome"]): [o["files"], o["bytes"]] for o in gc["outcomes"]} == counts
    assert sum(v[0] for v in counts.values()) == gc["planned"] > 0
    assert any(reason in ("failed_checkpoint", "orphan", "inprogress") for reason, _ in counts)


def test_metadata_and_inline_views_equal_the_snapshots(reported):
    data = reported["data"]
    snaps = {(s["root"], s["job_dir"], s["checkpoint_id"]): s for s in rows(reported, "snapshots")
             if s["layout_kind"] == "checkpoint_metadata"}
    assert data["metadata_series"]
    for p in data["metadata_series"]:
        s = snaps[(p["root"], p["job_dir"], p["checkpoint_id"])]
        assert (p["metadata_bytes"], p["inline_bytes"]) == (s["metadata_size"], s["inline_bytes"] or 0)
    per_operator: dict[tuple, int] = defaultdict(int)
    for r in rows(reported, "inline_state"):
        per_operator[(r["root"], r["job_dir"], r["operator_id"])] += r["inline_bytes"]
    top = sorted(per_operator.values(), reverse=True)[:len(data["operators"])]
    assert [o["inline_bytes"] for o in data["operators"]] == top
    for o in data["operators"]:
        assert per_operator[(o["root"], o["job_dir"], o["operator_id"])] == o["inline_bytes"]


def test_every_number_names_its_table(reported):
    page = reported["page"]
    for table in ("files", "references", "snapshots", "validation_jobs", "gc_actions", "inline_state"):
        assert re.search(rf'title="{table} v\d+: ', page), table


def test_second_report_has_a_trend_and_stays_latest(reported, spark):
    from statekeeper.report.job import BuildReport

    warehouse = reported["warehouse"]
    second = BuildReport(spark).warehouse(warehouse.uri).progress_interval(0).execute()
    store = ReportStore(warehouse)
    assert store.latest().run_id == second.run_id
    assert [r.run_id for r in store.runs()][:2] == [second.run_id, reported["result"].run_id]
    page = store.page(second.run_id)[1].decode()
    assert f'content="{second.run_id}"' in page
    data = json.loads(warehouse.file_io().read_bytes(store.data_uri(second.run_id)))
    assert [p["run_id"] for p in data["trend"]] == [reported["result"].run_id, second.run_id]
