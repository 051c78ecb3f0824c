"""Chains on real Flink stores, every harness version: dependencies/pins/explain against ground truth.

Ground truth is Flink's own reading of every `_metadata` (the harness oracle: which physical files
and file-merging directories each snapshot references) and the harness manifest (which job
directory and savepoint directory is which job). Expected dependencies are derived from those
alone: a file belongs to the chk-N/savepoint directory it sits in when that holds a `_metadata`,
else to its job directory.

One index run and one chains run per version cover the scenarios below (they are cheap table
checks); the relocated S3 run covers one version.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.chains import graph
from statekeeper.inspect.explain import explain
from statekeeper.chains.job import SUCCEEDED, ComputeChains
from statekeeper.storage import StorageConfig
from statekeeper.tables import Warehouse
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS
from statekeeper.uri import normalize_uri
from tests.index.support import fixture_roots, run_index

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

SCENARIOS = ("chain_claim", "chain_noclaim", "savepoints", "file_merging")


def uri(path) -> str:
    return normalize_uri(str(path))


class Truth:
    """Expected direct dependencies of one scenario, from the oracle and the manifest."""

    def __init__(self, fx: harness.Fixture, readings: dict[str, dict]):
        self.fx = fx
        self.jobs = {uri(j["job_dir"]): j["name"] for j in fx.manifest["jobs"]}
        self.savepoints = {uri(s["dir"]): s for s in fx.manifest["savepoints"]}
        self.snapshots = {m: r for m, r in readings.items()}
        self.dirs = {m.rsplit("/", 1)[0] for m in self.snapshots}
        self.direct: dict[tuple[str, str], dict] = {}
        for meta, reading in self.snapshots.items():
            own_dir = meta.rsplit("/", 1)[0]
            own_job = self.owner_job(own_dir)
            groups: dict[str, dict] = defaultdict(lambda: {"files": 0, "directories": 0, "bytes": 0})
            for f in reading["referenced_files"]:
                path = uri(f["path"])
                target = self.target(path)
                groups[target]["files"] += 1
                groups[target]["bytes"] += Path(path[len("file://"):]).stat().st_size
            managed = {uri(d) for h in reading["handles"] for d in (h.get("managed_dirs") or ())}
            for d in managed:
                groups[self.target(d)]["directories"] += 1
            for target, g in groups.items():
                if target == own_dir:
                    relation = "self"
                elif target in self.savepoints or target.rsplit("/", 1)[0] in self.savepoints:
                    relation = "savepoint"
                elif self.owner_job(target) == own_job:
                    relation = "own_job"
                else:
                    relation = "other_job"
                self.direct[(meta, target)] = {**g, "relation": relation}

    def owner_job(self, directory: str) -> str | None:
        return next((j for j in self.jobs if directory == j or directory.startswith(j + "/")), None) or \
            next((s for s in self.savepoints if directory == s or directory.startswith(s + "/")), None)

    def target(self, path: str) -> str:
        parent = path.rsplit("/", 1)[0]
        if parent in self.dirs:
            return parent
        owner = self.owner_job(parent)
        assert owner is not None, f"{path} lies outside every job and savepoint directory of the store"
        return owner

    def snapshots_of(self, job: str) -> list[str]:
        return [uri(Path(d) / "_metadata") for d in self.fx.job(job)["retained_checkpoints"]]

    def job_dir(self, job: str) -> str:
        return uri(self.fx.job(job)["job_dir"])


class Chained:
    def __init__(self, warehouse: Warehouse, truths: dict[str, Truth], result):
        self.warehouse = warehouse
        self.truths = truths
        self.result = result
        self.deps = DeltaTable(warehouse.delta_location("dependencies")).to_pyarrow_table().to_pylist()
        self.pins = DeltaTable(warehouse.delta_location("pins")).to_pyarrow_table().to_pylist()

    def rows(self, table: str, scenario: str) -> list[dict]:
        root = uri(self.truths[scenario].fx.root) + "/"
        return [r for r in getattr(self, table) if r["snapshot_uri"].startswith(root)]


@pytest.fixture(scope="module")
def chained(spark, flink_fixture, tmp_path_factory):
    cache: dict[str, Chained] = {}

    def get(version: str) -> Chained:
        if version not in cache:
            fixtures = {s: flink_fixture(version, s) for s in SCENARIOS if s in harness.scenarios_for(version)}
            metas = [p for fx in fixtures.values() for p in fx.metadata_files()]
            readings = dict(zip((uri(p) for p in metas), harness.run_oracle(version, metas), strict=True))
            truths = {s: Truth(fx, {m: r for m, r in readings.items() if m.startswith(uri(fx.root) + "/")})
                      for s, fx in fixtures.items()}
            warehouse = Warehouse(str(tmp_path_factory.mktemp(f"chains-{version}")))
            roots = [str(p) for fx in fixtures.values() for p in fixture_roots(fx)]
            index = run_index(spark, roots, warehouse)
            assert index.status == "succeeded", index.summary()
            result = ComputeChains(spark).warehouse(warehouse).storage(StorageConfig()).execute()
            cache[version] = Chained(warehouse, truths, result)
        return cache[version]
    return get


def direct_of(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["snapshot_uri"], r["target_uri"]): {"files": r["files"], "directories": r["directories"],
                                                   "bytes": r["bytes"], "relation": r["relation"]}
            for r in rows if r["dependency"] == "direct"}


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_dependencies_match_flink(chained, version):
    c = chained(version)
    assert c.result.status == SUCCEEDED and c.result.unparsed_snapshots == 0, c.result.summary()
    for scenario, truth in c.truths.items():
        assert direct_of(c.rows("deps", scenario)) == truth.direct, scenario
        # lineage is the pure rule applied to Flink's own dependencies
        units = {m: m.rsplit("/", 1)[0] for m in truth.snapshots}
        edges = [graph.DirectEdge(s, tuple(dict.fromkeys((units[s], truth.owner_job(units[s])))), t,
                                  v["relation"] in FOREIGN_RELATIONS) for (s, t), v in truth.direct.items()]
        want = {(x.snapshot_uri, x.target_uri, x.depth, x.via) for x in graph.lineage(edges)}
        got = {(r["snapshot_uri"], r["target_uri"], r["depth"], tuple(r["via"]))
               for r in c.rows("deps", scenario) if r["dependency"] == "transitive"}
        assert got == want, scenario


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_claim_and_legacy_restores_depend_on_their_source_job(chained, version):
    c = chained(version)
    t = c.truths["chain_claim"]
    deps = direct_of(c.rows("deps", "chain_claim"))
    a, b = t.job_dir("A"), t.job_dir("B")
    for job in ("B", "B_legacy", "C"):
        for s in t.snapshots_of(job):
            assert deps[(s, a)]["relation"] == "other_job" and deps[(s, a)]["files"] > 0, (job, s)
    for s in t.snapshots_of("C"):
        assert deps[(s, b)]["relation"] == "other_job", s
    for s in t.snapshots_of("A"):
        assert {v["relation"] for (x, _), v in deps.items() if x == s} <= {"self", "own_job"}

    # pins: A's directory is kept alive by A's own checkpoints and by B's, B_legacy's and C's
    pinned_by = {(r["snapshot_uri"], r["relation"]) for r in c.pins
                 if r["target_uri"] == a and r["dependency"] == "direct"}
    want = {(s, "own_job") for s in t.snapshots_of("A")} | {
        (s, "other_job") for job in ("B", "B_legacy", "C") for s in t.snapshots_of(job)}
    assert pinned_by == want
    assert all(r["bytes"] > 0 for r in c.pins if r["target_uri"] == a)

    # explain A's shared/: exactly the snapshots whose _metadata name a file in it, per Flink
    shared = a + "/shared"
    users = {m for m, r in t.snapshots.items() if any(uri(f["path"]).startswith(shared + "/")
                                                      for f in r["referenced_files"])}
    report = explain(shared, c.warehouse)
    assert set(report.would_break) == users
    assert {s for job in ("B", "B_legacy", "C") for s in t.snapshots_of(job)} <= users
    assert not report.caveats, report.caveats
    assert {r.relation for r in report.referenced_by if r.snapshot_uri in t.snapshots_of("C")} == {"other_job"}

    # explain one file of A's shared/: exactly its users
    c_newest = t.snapshots_of("C")[-1]
    one = min(uri(f["path"]) for f in t.snapshots[c_newest]["referenced_files"] if uri(f["path"]).startswith(shared))
    users = {m for m, r in t.snapshots.items() if one in {uri(f["path"]) for f in r["referenced_files"]}}
    assert set(explain(one, c.warehouse).would_break) == users and c_newest in users

    # explain C's newest checkpoint: every file it needs, and where it lives
    report = explain(c_newest.rsplit("/", 1)[0], c.warehouse)   # the checkpoint directory
    assert report.kind == "snapshot" and report.snapshot["uri"] == c_newest
    needs = {n.file_uri: n for n in report.needs}
    assert set(needs) == {uri(f["path"]) for f in t.snapshots[c_newest]["referenced_files"]}
    assert all(n.in_listing for n in needs.values())
    where = {(n.relation, n.target_uri) for n in needs.values()}
    assert where == {("own_job", t.job_dir("C")), ("other_job", a), ("other_job", b)}


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_no_cross_job_dependency_after_no_claim_restores(chained, version):
    c = chained(version)
    t = c.truths["chain_noclaim"]
    rows = c.rows("deps", "chain_noclaim")
    # B's first checkpoint after a NO_CLAIM restore is full: from then on nothing points back
    for job in ("B", "C"):
        snaps = set(t.snapshots_of(job))
        assert snaps and {r["relation"] for r in rows if r["snapshot_uri"] in snaps} <= {"self", "own_job"}
    assert not [r for r in rows if r["relation"] in FOREIGN_RELATIONS or r["dependency"] == "transitive"]
    report = explain(t.job_dir("A"), c.warehouse)
    assert set(report.would_break) == set(t.snapshots_of("A"))


@pytest.mark.parametrize("version", harness.FLINK_VERSIONS)
def test_savepoints_and_file_merging(chained, version):
    c = chained(version)
    t = c.truths["savepoints"]
    for sp in t.savepoints:
        rows = [r for r in c.deps if r["snapshot_uri"] == sp + "/_metadata"]
        assert rows and {(r["relation"], r["target_kind"]) for r in rows} == {("self", "savepoint")}
        report = explain(sp, c.warehouse)
        assert report.kind == "snapshot" and not report.would_break
        assert {n.relation for n in report.needs} == {"self"} and all(n.in_listing for n in report.needs)
    fm = c.rows("deps", "file_merging")
    assert sum(r["directories"] or 0 for r in fm) > 0, "file merging snapshots name managed directories"
