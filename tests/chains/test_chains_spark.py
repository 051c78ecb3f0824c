"""The chains graph on synthetic index tables: Spark's DataFrame logic equals the pure rules.

Synthetic stores (tests.chains.support.synthetic_index) have restore chains between jobs, shared
files named twice, segments, file-merging directories, savepoints, files outside every root, a
`_metadata` that failed to parse and files missing from the listing. Expected direct dependencies
are computed row by row in Python; expected lineage by statekeeper.chains.graph. The job itself
(tables, audit row, explain) runs on synthetic tables in tests/validate/test_validate_spark.py.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from statekeeper.chains import graph
from statekeeper.chains.spark_graph import lineage
from statekeeper.jobs.context import Materialized
from statekeeper.layout.locate import lineage_nodes
from statekeeper.layout.spark_locate import direct_edges, file_uses
from statekeeper.tables.catalog import FILES, REFERENCES, SNAPSHOTS
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS
from tests.chains.support import SyntheticIndex, expected_direct, synthetic_index

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
        direct = keep(direct_edges(file_uses(refs, snaps, files)))
        rows = direct.collect()
        trans = {(r["snapshot_uri"], r["target_uri"], r["depth"], tuple(r["via"]))
                 for r in lineage(direct).collect()}
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


def test_the_spark_columns_of_a_units_job_equal_the_pure_functions(spark):
    from statekeeper.layout.locate import job_location, location_job_dir, unit_kind
    from statekeeper.layout.spark_locate import job_location_of, job_of, unit_kind_of

    names = [".", "chk-5", "chk-0012", "chk-", "chk-5x", "CHK-5", "shared", "shared2", "taskowned", "taskowned/x",
             "a" * 32, "A" * 32, "a" * 31, "0b15a46fcc04b7f827959ed5f4862eff", "savepoint-0b15a4-0123456789ab",
             "savepoint-0b15a4-0123456789a", "compacted", "dstl", "odd dir%41+x", "job_x_op_y"]
    roots = ["file:///r", "s3://b/root/", "file:///r//"]
    rows = [(root, name) for root in roots for name in names]
    got = (spark.createDataFrame(rows, "root string, job_dir string")
           .select("root", "job_dir", job_of().alias("job"), unit_kind_of().alias("kind"),
                   job_location_of().alias("location")).collect())
    assert {(r["root"], r["job_dir"]): (r["job"], r["kind"], r["location"]) for r in got} == {
        (root, name): (location_job_dir(name), str(unit_kind(name)), job_location(root, name)) for root, name in rows}
