"""Validation on real Flink stores, damaged on purpose, with Flink's restore as the ground truth.

One Flink version (the newest configured; CI time): relocated COPIES of the cached chain_claim and
savepoints stores (every absolute path rewritten into the copy, so the copy restores on its own
and the read-only cache is never touched), each damaged in one way:

* `shared`  - one SST in job A's shared/ that job C's newest checkpoint uses is deleted;
* `trunc`   - one of job C's own shared files is truncated to half;
* `rel`     - one relative (tag-6) file of the NATIVE savepoint is deleted;
* `meta`    - job B's newest `_metadata` is corrupted;
* `intact`, `intact_sp` - untouched copies.

All copies are indexed together and validated in one run (through the spark_jobs entry point, so
its exit status is checked too). Expected findings come from Flink's own reading of the
`_metadata` files (the oracle): exactly the snapshots that reference the damaged file, with the
right check. The restore verifier then confirms: flagged snapshots do not restore, the reported
latest restorable checkpoints do.

FLINK-39964 itself is reproduced with Flink (job B restores a NATIVE savepoint in CLAIM mode),
and validation must flag exactly B's checkpoints, pointing at the savepoint's copies of the files.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from tests.chains.support import (
    claim_native_savepoint_store,
    oracle_references,
    relocate_store,
    store_roots,
    verify_job,
)
from tests.index.support import run_index

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = "2.3.0" if "2.3.0" in harness.FLINK_VERSIONS else harness.FLINK_VERSIONS[-1]


def uri(p) -> str:
    return normalize_uri(str(p))


def local(u: str) -> Path:
    return Path(u[len("file://"):])


# RocksDB's block-based table magic number, the last 8 bytes of every SST (little-endian).
_SST_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")


def is_sst(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-8, 2)
        return f.read(8) == _SST_MAGIC


class Case:
    def __init__(self, name: str, fx: harness.Fixture, copy: str, truth: dict[str, dict[str, int]]):
        self.name, self.fx, self.copy = name, fx, copy
        old = uri(fx.root)
        self.map = lambda u: copy + u[len(old):]
        # Flink's reading of the original store, moved into the copy's paths
        self.truth = {self.map(m): {self.map(f): s for f, s in files.items()} for m, files in truth.items()
                      if m.startswith(old + "/")}
        self.expected: dict[str, set[str]] = {}   # snapshot -> checks that must fail

    def snapshots_of(self, job: str) -> list[str]:
        return [self.map(uri(Path(d) / "_metadata")) for d in self.fx.job(job)["retained_checkpoints"]]

    def users(self, file_uri: str) -> set[str]:
        return {m for m, files in self.truth.items() if file_uri in files}


@pytest.fixture(scope="module")
def damaged(spark, flink_fixture, tmp_path_factory):
    from spark_jobs.validate_checkpoints import main as validate_main

    base = tmp_path_factory.mktemp("damaged")
    chain, sps = flink_fixture(VERSION, "chain_claim"), flink_fixture(VERSION, "savepoints")
    truth = oracle_references(VERSION, chain.metadata_files() + sps.metadata_files())
    cases = {}
    for name, fx in (("intact", chain), ("intact_sp", sps), ("shared", chain), ("trunc", chain), ("rel", sps),
                     ("meta", chain)):
        cases[name] = Case(name, fx, relocate_store(fx.root, str(base / name)), truth)

    c = cases["shared"]
    c_newest = c.snapshots_of("C")[-1]
    a_shared = uri(c.fx.job("A")["job_dir"]) + "/shared/"
    victim = min((f for f in c.truth[c_newest] if f.startswith(c.map(a_shared))), key=lambda f: (len(c.users(f)), f))
    local(victim).unlink()
    c.victim = victim
    c.expected = {s: {"file_exists"} for s in c.users(victim)}

    c = cases["trunc"]
    c_shared = c.map(uri(c.fx.job("C")["job_dir"]) + "/shared/")
    # Only an SST: Flink 2.x also keeps RocksDB's OPTIONS file in shared/, and a restore never reads
    # it, so a truncated OPTIONS file restores fine (validation still flags it, deliberately).
    victim = min((f for f in c.truth[c.snapshots_of("C")[-1]] if f.startswith(c_shared) and is_sst(local(f))),
                 key=lambda f: (len(c.users(f)), f))
    data = local(victim).read_bytes()
    local(victim).write_bytes(data[: len(data) // 2])
    c.victim = victim
    c.expected = {s: {"file_size"} for s in c.users(victim)}

    c = cases["rel"]
    native = c.map(uri(next(d for d in c.fx.savepoint_dirs("NATIVE"))) + "/_metadata")
    victim = max(c.truth[native], key=lambda f: (c.truth[native][f], f))
    local(victim).unlink()
    c.victim = victim
    c.expected = {native: {"relative_resolves"}}

    c = cases["meta"]
    b_newest = c.snapshots_of("B")[-1]
    data = local(b_newest).read_bytes()
    local(b_newest).write_bytes(data[: len(data) * 2 // 3])     # a torn write: the tail is missing
    c.victim = b_newest
    c.expected = {b_newest: {"metadata_parses"}}

    warehouse = Warehouse(str(base / "warehouse"))
    roots = [r for case in cases.values() for r in store_roots(case.copy)]
    index = run_index(spark, roots, warehouse)
    assert index.status == "succeeded", index.summary()
    result_json = base / "result.json"
    code = validate_main(["--warehouse", warehouse.uri, "--run-id", "airflow-run-1", "--result-json",
                          str(result_json)])
    result = json.loads(result_json.read_text())
    results = DeltaTable(warehouse.delta_location("validation_results")).to_pyarrow_table().to_pylist()
    jobs = DeltaTable(warehouse.delta_location("validation_jobs")).to_pyarrow_table().to_pylist()
    return {"cases": cases, "warehouse": warehouse, "code": code, "result": result, "results": results,
            "jobs": jobs}


def errors_under(rows: list[dict], copy: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in rows:
        if r["snapshot_uri"].startswith(copy + "/") and r["severity"] == "error" and r["check"] != "snapshot":
            out.setdefault(r["snapshot_uri"], set()).add(r["check"])
    return out


def test_exit_status_and_summary(damaged):
    result = damaged["result"]
    assert damaged["code"] == 1, result
    assert result["status"] == "unrestorable"
    named = {j["newest_uri"]: j for j in result["unrestorable"]}
    bad = {j["newest_uri"] for j in damaged["jobs"] if j["kind"] == "job" and not j["newest_restorable"]}
    assert set(named) == bad and result["jobs_unrestorable"] == len(bad)
    assert damaged["cases"]["meta"].victim in named and named[damaged["cases"]["meta"].victim]["errors"] == [
        "metadata_parses"]
    assert result["quality_success"] is True, result["quality_failures"]
    wh = damaged["warehouse"]
    assert local(wh.uri + "/_reports/validation/data_docs/index.html").is_file()
    # Every asset's result is rendered (the site is built once, after the last asset); this warehouse
    # has no chains tables, so their two assets are absent.
    pages = {p.parent.parent.parent.name
             for p in local(wh.uri + "/_reports/validation/data_docs/validations").rglob(f"*/{result['run_id']}/*/*.html")}
    results = json.loads(local(wh.uri + f"/_reports/validation/runs/{result['run_id']}/gx_results.json").read_text())
    assert pages == set(results) == {"files", "snapshots", "references", "inline_state", "reference_files",
                                     "referencing_snapshots", "snapshot_ids"}, pages
    assert local(wh.uri + f"/_reports/validation/runs/{result['run_id']}/gx_results.json").is_file()
    runs = DeltaTable(wh.delta_location("validation_runs")).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["status"], r["airflow_run_id"]) for r in runs] == [
        (result["run_id"], "unrestorable", "airflow-run-1")]


@pytest.mark.parametrize("name", ["intact", "intact_sp", "shared", "trunc", "rel", "meta"])
def test_flags_exactly_the_damaged_snapshots(damaged, name):
    case = damaged["cases"][name]
    assert case.name.startswith("intact") or case.expected, "the damage must reach some snapshot"
    assert errors_under(damaged["results"], case.copy) == case.expected
    summaries = {r["snapshot_uri"]: r for r in damaged["results"]
                 if r["check"] == "snapshot" and r["snapshot_uri"].startswith(case.copy + "/")}
    assert set(summaries) == set(case.truth)
    for s, row in summaries.items():
        assert row["restorable"] == (s not in case.expected), s
    if hasattr(case, "victim") and name != "meta":
        details = [r["detail"] for r in damaged["results"] if r["subject"] == case.victim]
        assert details and all(case.victim in d for d in details)


def test_per_job_newest_and_latest_restorable(damaged):
    for case in damaged["cases"].values():
        for job in case.fx.manifest["jobs"]:
            snaps = case.snapshots_of(job["name"])
            row = next(j for j in damaged["jobs"] if j["location"] == case.map(uri(job["job_dir"])))
            assert row["newest_uri"] == snaps[-1]
            assert row["newest_restorable"] == (snaps[-1] not in case.expected)
            good = [s for s in snaps if s not in case.expected]
            assert row["latest_restorable_uri"] == (good[-1] if good else None)


@pytest.mark.timeout(1800)
def test_restore_confirms_the_verdicts(damaged):
    """Flagged snapshots fail to restore; the reported latest restorable checkpoints restore."""
    cases, jobs = damaged["cases"], damaged["jobs"]

    def job_row(case: Case, job: str) -> dict:
        return next(j for j in jobs if j["location"] == case.map(uri(case.fx.job(job)["job_dir"])))

    # (snapshot, scenario, job, must restore): collected first, restored in one JVM
    expect: list[tuple[str, str, str, bool]] = []
    # intact copy: what validation calls the newest restorable checkpoint of C restores
    expect.append((job_row(cases["intact"], "C")["latest_restorable_uri"], "chain_claim", "C", True))
    # deleted shared SST of A: C's newest checkpoint is flagged and does not restore
    c_newest = cases["shared"].snapshots_of("C")[-1]
    assert c_newest in cases["shared"].expected
    expect.append((c_newest, "chain_claim", "C", False))
    # truncated file: the flagged newest fails, the reported latest restorable one restores
    trunc = job_row(cases["trunc"], "C")
    assert trunc["newest_uri"] in cases["trunc"].expected
    expect.append((trunc["newest_uri"], "chain_claim", "C", False))
    if trunc["latest_restorable_uri"]:
        expect.append((trunc["latest_restorable_uri"], "chain_claim", "C", True))
    # corrupt _metadata of B's newest: B's previous checkpoint is the latest restorable and restores
    meta = job_row(cases["meta"], "B")
    assert meta["latest_restorable_uri"] == cases["meta"].snapshots_of("B")[-2]
    expect.append((meta["newest_uri"], "chain_claim", "B", False))
    expect.append((meta["latest_restorable_uri"], "chain_claim", "B", True))
    # a native savepoint without one of its relative files does not restore
    (native,) = cases["rel"].expected
    expect.append((native, "savepoints", "A", False))

    verdicts = harness.verify_restore_many(
        VERSION, [(local(snapshot).parent, scenario, job) for snapshot, scenario, job, _ in expect])
    assert [(snapshot, v.ok) for (snapshot, *_), v in zip(expect, verdicts)] == \
        [(snapshot, ok) for snapshot, _, _, ok in expect], [v.output[-2000:] for v in verdicts]


@pytest.mark.timeout(1800)
def test_flink_39964_checkpoints_after_claim_restore_of_native_savepoint(spark, tmp_path):
    """Real FLINK-39964: job B restored from a NATIVE savepoint in CLAIM mode keeps the savepoint's
    SSTs as relative handles, which resolve against B's chk-N directory, where they are not."""
    from statekeeper.validate.job import UNRESTORABLE, ValidateCheckpoints
    from statekeeper.validate.options import ValidateOptions

    store = tmp_path / "store"
    made = claim_native_savepoint_store(VERSION, store)
    b_dir = Path(made["B"]["job_dir"][len("file:"):] if made["B"]["job_dir"].startswith("file:")
                 else made["B"]["job_dir"])
    b_checkpoints = sorted(uri(p) for p in Path("/" + str(b_dir).lstrip("/")).glob("chk-*/_metadata"))
    assert b_checkpoints
    warehouse = Warehouse(str(tmp_path / "wh"))
    assert run_index(spark, store_roots(uri(store)), warehouse).status == "succeeded"
    result = ValidateCheckpoints(spark).warehouse(warehouse).configure(ValidateOptions(quality_suite=False)).execute()
    assert result.status == UNRESTORABLE, result.summary()
    rows = DeltaTable(warehouse.delta_location("validation_results")).to_pyarrow_table().to_pylist()
    flagged = errors_under(rows, uri(store))
    assert flagged == {s: {"relative_resolves"} for s in b_checkpoints}
    sp = uri(made["savepoint"])
    for r in rows:
        if r["check"] == "relative_resolves":
            assert "FLINK-39964" in r["detail"] and f"{sp}/" in r["detail"], r["detail"]
    assert not verify_job(VERSION, local(b_checkpoints[-1]).parent, made["b_plan"]).ok
    assert os.path.isdir(made["savepoint"])
