"""The chains job on synthetic index tables: Spark's graph equals the pure rules, end to end.

Synthetic stores (tests.chains_support.synthetic_index) have restore chains between jobs, shared
files named twice, segments, file-merging directories, savepoints, files outside every root, a
`_metadata` that failed to parse and files missing from the listing. Expected direct dependencies
are computed row by row in Python; expected lineage by statekeeper.chains.graph.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from statekeeper.chains import graph
from statekeeper.chains.explain import explain
from statekeeper.chains.job import INCOMPLETE, ComputeChains
from statekeeper.chains.locate import FOREIGN_RELATIONS, lineage_nodes
from statekeeper.chains.spark_graph import Materialized, direct_edges, file_uses, lineage
from statekeeper.storage import StorageConfig
from statekeeper.tables import Warehouse
from statekeeper.tables.catalog import FILES, REFERENCES, SNAPSHOTS
from tests.chains_support import SyntheticIndex, expected_direct, synthetic_index, write_index

pytestmark = pytest.mark.spark


def combined(*seeds: int) -> SyntheticIndex:
    parts = [synthetic_index(seed, f"s3://bucket-{seed}/store") for seed in seeds]
    out = SyntheticIndex([r for p in parts for r in p.roots])
    for p in parts:
        out.snapshots += p.snapshots
        out.references += p.references
        out.files += p.files
        out.sizes.update(p.sizes)
    return out


def frames(spark, idx: SyntheticIndex):
    def df(spec, rows):
        return spark.createDataFrame(pa.Table.from_pylist(rows, schema=spec.schema))
    return df(SNAPSHOTS, idx.snapshots), df(REFERENCES, idx.references), df(FILES, idx.files)


def pure_lineage(idx: SyntheticIndex, direct: dict) -> set[tuple]:
    units = {s["uri"]: (s["root"], s["job_dir"]) for s in idx.snapshots}
    edges = [graph.DirectEdge(s, lineage_nodes(s, *units[s]), t, v["relation"] in FOREIGN_RELATIONS)
             for (s, t), v in direct.items()]
    return {(r.snapshot_uri, r.target_uri, r.depth, r.via) for r in graph.lineage(edges)}


def test_spark_graph_equals_the_pure_rules(spark):
    idx = combined(1, 2, 3)
    snaps, refs, files = frames(spark, idx)
    with Materialized() as keep:
        direct = keep(direct_edges(file_uses(refs, snaps), files))
        rows = direct.collect()
        trans = {(r["snapshot_uri"], r["target_uri"], r["depth"], tuple(r["via"]))
                 for r in lineage(direct, keep).collect()}
    got = {(r["snapshot_uri"], r["target_uri"]): {"relation": r["relation"], "files": r["files"],
                                                  "directories": r["directories"], "bytes": r["bytes"],
                                                  "kind": r["target_kind"]}
           for r in rows}
    want = expected_direct(idx)
    assert got == want
    relations = {v["relation"] for v in want.values()}
    assert relations >= {"self", "own_job", "other_job", "savepoint", "external"}, relations

    expected = pure_lineage(idx, want)
    assert trans == expected
    assert any(d >= 3 for _, _, d, _ in expected), "the synthetic chains should be at least 3 jobs deep"


def test_compute_chains_job_writes_both_views(spark, tmp_path):
    idx = synthetic_index(7, "s3://bucket/store")
    warehouse = Warehouse(str(tmp_path / "wh"))
    write_index(spark, warehouse, idx)
    result = ComputeChains(spark).warehouse(warehouse).storage(StorageConfig()).run_id("chn-test").execute()

    assert result.status == INCOMPLETE and result.unparsed_snapshots == 1, result.summary()
    assert "INCOMPLETE" in result.summary()
    deps = DeltaTable(warehouse.delta_location("dependencies")).to_pyarrow_table().to_pylist()
    pins = DeltaTable(warehouse.delta_location("pins")).to_pyarrow_table().to_pylist()
    want = expected_direct(idx)
    got = {(r["snapshot_uri"], r["target_uri"]): {"relation": r["relation"], "files": r["files"],
                                                  "directories": r["directories"], "bytes": r["bytes"],
                                                  "kind": r["target_kind"]}
           for r in deps if r["dependency"] == "direct"}
    assert got == want
    assert {(r["snapshot_uri"], r["target_uri"], r["depth"], tuple(r["via"]))
            for r in deps if r["dependency"] == "transitive"} == pure_lineage(idx, want)
    assert result.direct_rows == len(want) and result.transitive_rows == len(deps) - len(want)

    # pins hold the same edges, partitioned by the target's unit
    key = ("snapshot_uri", "target_uri", "relation", "dependency", "depth", "files", "bytes")
    assert sorted(tuple(r[k] for k in key) for r in pins) == sorted(tuple(r[k] for k in key) for r in deps)
    for r in pins:
        assert r["target_uri"].startswith(r["root"] + "/") if r["root"] else r["root_id"] == "external"
    snap_info = {s["uri"]: s for s in idx.snapshots}
    for r in deps:
        s = snap_info[r["snapshot_uri"]]
        assert (r["root"], r["job_dir"], r["snapshot_checkpoint_id"]) == (s["root"], s["job_dir"], s["checkpoint_id"])
        assert r["run_id"] == "chn-test"

    runs = DeltaTable(warehouse.delta_location("chains_runs")).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["status"], r["unparsed_snapshots"]) for r in runs] == [("chn-test", INCOMPLETE, 1)]
    assert dict(runs[0]["source_versions"]) == {"snapshots": 0, "references": 0, "files": 0}

    # explain a job directory: exactly the snapshots that reference files in it, per the references
    parent = next(p for j, p in idx.chains.items() if p)
    job_uri = f"s3://bucket/store/checkpoints/{parent}"
    users = {r["snapshot_uri"] for r in idx.references if r["file_uri"].startswith(job_uri + "/")}
    report = explain(job_uri, warehouse)
    assert {r.snapshot_uri for r in report.referenced_by} == users
    assert set(report.would_break) == users
    assert any("could not be parsed" in c for c in report.caveats)

    # a second run over unchanged inputs gives the same tables
    again = ComputeChains(spark).warehouse(warehouse).storage(StorageConfig()).execute()
    assert (again.direct_rows, again.transitive_rows) == (result.direct_rows, result.transitive_rows)
