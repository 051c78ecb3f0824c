"""A real Flink store inside a directory whose name needs URI escaping: `odd dir%41+x` (issue #12).

The harness's `odd_path` scenario (Flink 2.3+ only, CI time): job A (RocksDB incremental, 4
checkpoints, 3 retained) and job B restored from A's newest checkpoint in CLAIM mode, so B's
checkpoints reference A's `shared/` files, all below `<fixture>/odd dir%41+x/checkpoints/`.
Flink writes that directory and records its paths in `_metadata` exactly as written (`file:/...
/odd dir%41+x/...`); Flink's `Path` never percent-decodes, so nothing of ours may either: `%41` is
three characters of a directory name, not an `A`.

Ground truth is Flink: its own loader (the harness oracle), the directory listing and the restore
verifier. Expected URIs are spelled here as `file://` + the absolute path, independently of
`statekeeper.uri`. One index run and one validation run (through the spark_jobs entry point) serve
the index and validation tests.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.format import extract_references, read_metadata
from statekeeper.tables import Warehouse
from tests.index.support import run_index, table_rows

pytestmark = [pytest.mark.flink]

SCENARIO = "odd_path"
ODD = "odd dir%41+x"
_VERSIONS = [v for v in harness.FLINK_VERSIONS if harness.supports(v, SCENARIO)]
VERSION = _VERSIONS[-1] if _VERSIONS else None
needs_version = pytest.mark.skipif(VERSION is None, reason=f"no configured Flink version has {SCENARIO} (2.3+)")


def file_uri(path: str | Path) -> str:
    """`file://` + the absolute path as written (what every URI of this store must look like)."""
    text = str(path)
    assert text.startswith("/") and "//" not in text, text
    return "file://" + text


def flink_local(path: str) -> str:
    """Flink's `file:/abs/path` spelling to the local path, verbatim."""
    assert path.startswith("file:/") and not path.startswith("file://"), path
    return path[len("file:"):]


@pytest.fixture(scope="module")
def store(flink_fixture) -> harness.Fixture:
    fx = flink_fixture(VERSION, SCENARIO)
    assert fx.root.name == ODD and (fx.root / "checkpoints").is_dir()
    # The premise: the odd directory is real, and its percent-decoded spelling names nothing.
    assert not (fx.root.parent / ODD.replace("%41", "A")).exists()
    return fx


@pytest.fixture(scope="module")
def truth(store) -> dict[str, dict]:
    """metadata path -> Flink's own reading (one oracle JVM)."""
    files = store.metadata_files()
    readings = harness.run_oracle(VERSION, files)
    out = {}
    for path, reading in zip(files, readings, strict=True):
        assert "error" not in reading, reading
        out[str(path)] = reading
    return out


def flink_files(reading: dict) -> set[str]:
    return {flink_local(f["path"]) for f in reading["referenced_files"]}


@needs_version
def test_fixture_shape(store, truth):
    """A's and B's checkpoints are all there, and B (CLAIM) really names files in A's shared/."""
    a, b = store.job("A"), store.job("B")
    assert b["claim_mode"] == "CLAIM" and b["restored_from_job"] == "A"
    assert set(truth) == {str(Path(d) / "_metadata") for d in a["retained_checkpoints"] + b["retained_checkpoints"]}
    b_newest = truth[str(Path(b["retained_checkpoints"][-1]) / "_metadata")]
    a_shared = a["job_dir"] + "/shared/"
    assert any(p.startswith(a_shared) for p in flink_files(b_newest))
    for reading in truth.values():
        files = flink_files(reading)
        assert files and all(f"/{ODD}/checkpoints/" in p and os.path.isfile(p) for p in files), files


@needs_version
def test_codec_names_the_files_flink_names(store, truth):
    """(a) For every `_metadata`: the codec's file references are exactly Flink's referenced files."""
    for path, reading in truth.items():
        model = read_metadata(Path(path), path)
        refs = extract_references(model, path)
        files = [r for r in refs.files if r.scope != "file_merging_managed_dir"]
        # The bytes are read right: stored paths are Flink's spelling, verbatim.
        assert {r.stored_path for r in files} == {f["path"] for f in reading["referenced_files"]}, path
        codec = {r.uri for r in files}
        want = {file_uri(p) for p in flink_files(reading)}
        assert codec == want, (f"{path}: the codec names files Flink does not "
                               f"(first: {sorted(codec - want)[:1]}), and misses {len(want - codec)}")
        for uri in codec:
            assert os.path.isfile(uri[len("file://"):]), uri


@pytest.fixture(scope="module")
def indexed(spark, store, truth, tmp_path_factory) -> dict:
    """One index run over the store and one validation run (the spark_jobs entry point)."""
    from spark_jobs.validate_checkpoints import main as validate_main

    base = tmp_path_factory.mktemp("odd-index")
    warehouse = Warehouse(str(base / "warehouse"))
    roots = [str(store.root / "checkpoints"), str(store.root / "savepoints")]
    index = run_index(spark, roots, warehouse)
    assert index.status == "succeeded", index.summary()
    result_json = base / "result.json"
    # Without the Great Expectations suite over the index tables (CI time; it judges table
    # contents, not paths): the verdicts come from the checks of every referenced file.
    code = validate_main(["--warehouse", warehouse.uri, "--result-json", str(result_json), "--no-quality-suite"])
    return {
        "tables": {name: table_rows(warehouse, name) for name in ("files", "snapshots", "references")},
        "code": code,
        "result": json.loads(result_json.read_text()),
        "jobs": DeltaTable(warehouse.delta_location("validation_jobs")).to_pyarrow_table().to_pylist(),
    }


def listing(store: harness.Fixture) -> set[str]:
    out = set()
    for top in ("checkpoints", "savepoints"):
        for dirpath, _dirs, names in os.walk(store.root / top):
            out.update(file_uri(Path(dirpath) / name) for name in names)
    return out


@needs_version
@pytest.mark.spark
@pytest.mark.slow
def test_index_references_are_listed_files(store, truth, indexed):
    """(b) Every reference of every ok snapshot is a listed file: no false missing files; every
    file Flink references is referenced in the index: no false orphans."""
    tables = indexed["tables"]
    listed = {r["uri"] for r in tables["files"]}
    assert listed == listing(store)
    snapshots = {r["uri"]: r for r in tables["snapshots"]}
    assert set(snapshots) == {file_uri(p) for p in truth}
    assert {u: r["status"] for u, r in snapshots.items()} == {u: "ok" for u in snapshots}
    by_snapshot: dict[str, set[str]] = {}
    for r in tables["references"]:
        by_snapshot.setdefault(r["snapshot_uri"], set()).add(r["file_uri"])
    for path, reading in truth.items():
        refs = by_snapshot.get(file_uri(path), set())
        missing = sorted(refs - listed)
        assert not missing, f"{path}: {len(missing)} referenced files not in the listing, e.g. {missing[:1]}"
        assert refs == {file_uri(p) for p in flink_files(reading)}, path
    # Flink deleted what no retained checkpoint uses: shared/ holds only referenced files, and so
    # the index must reference every one of them.
    referenced = set().union(*by_snapshot.values())
    shared = {u for u in listed if "/shared/" in u}
    flink_referenced = {file_uri(p) for reading in truth.values() for p in flink_files(reading)}
    assert shared <= flink_referenced
    assert shared - referenced == set(), "false orphans"


@needs_version
@pytest.mark.spark
@pytest.mark.slow
def test_validation_calls_the_newest_checkpoints_restorable(store, indexed):
    """(c) Validation: each job's newest retained checkpoint is restorable."""
    assert indexed["result"]["status"] == "ok", indexed["result"]
    assert indexed["code"] == 0
    jobs = {r["location"]: r for r in indexed["jobs"]}
    for job in store.manifest["jobs"]:
        row = jobs[file_uri(job["job_dir"])]
        newest = file_uri(Path(job["retained_checkpoints"][-1]) / "_metadata")
        assert row["newest_uri"] == newest
        assert row["newest_restorable"] is True, row
        assert row["latest_restorable_uri"] == newest


@needs_version
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_flink_restores_what_validation_names(store, indexed):
    """(d) Real Flink restores B's newest checkpoint from the odd path (exact state, one new
    checkpoint), and it is the checkpoint validation names as B's latest restorable one."""
    b_newest = Path(store.job("B")["retained_checkpoints"][-1])
    verdict = harness.verify_restore(VERSION, b_newest, SCENARIO, job="B")
    assert verdict.ok, verdict.output[-4000:]
    row = next(r for r in indexed["jobs"] if r["location"] == file_uri(store.job("B")["job_dir"]))
    assert row["latest_restorable_uri"] == file_uri(b_newest / "_metadata")
