"""Both jobs end to end on synthetic index tables: chains tables, validation findings, entry points,
the `statekeeper explain` CLI.

The synthetic store (tests.chains.support.synthetic_index) has files missing from the listing,
files shorter than their handles (segments too), relative handles without their file, files
outside every root, a `_metadata` that failed to parse and cross-directory dependencies. Expected
findings are computed row by row in Python from the same rows.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_jobs.compute_chains import main as chains_main
from spark_jobs.validate_checkpoints import main as validate_main
from statekeeper.cli import main as cli_main
from statekeeper.commands.explain import EXIT_REFERENCED
from statekeeper.layout.locate import job_location
from statekeeper.tables import Warehouse, delta_log
from statekeeper.tables.catalog import FILES
from statekeeper.tables.delta_spark import DeltaSparkEngine
from tests.tables.writes import append_rows
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS
from tests.chains.support import audit_cut, expected_direct, expected_findings, synthetic_index, write_index

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def synthetic(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("synthetic")
    idx = synthetic_index(11, "s3://bucket/store")
    warehouse = Warehouse(str(base / "wh"))
    write_index(spark, warehouse, idx)
    chains_json = base / "chains.json"
    assert chains_main(["--warehouse", warehouse.uri, "--run-id", "dag-1", "--result-json", str(chains_json)]) == 0
    result_json = base / "validate.json"
    code = validate_main(["--warehouse", warehouse.uri, "--no-quality-suite", "--result-json", str(result_json)])
    rows = DeltaTable(warehouse.delta_location("validation_results")).to_pyarrow_table().to_pylist()
    jobs = DeltaTable(warehouse.delta_location("validation_jobs")).to_pyarrow_table().to_pylist()
    return {"idx": idx, "warehouse": warehouse, "code": code, "result": json.loads(result_json.read_text()),
            "chains": json.loads(chains_json.read_text()), "rows": rows, "jobs": jobs, "base": base}


def test_chains_job_writes_both_views(synthetic):
    idx, warehouse, result = synthetic["idx"], synthetic["warehouse"], synthetic["chains"]
    assert result["status"] == "incomplete" and result["unparsed_snapshots"] == 1, result
    deps = DeltaTable(warehouse.delta_location("dependencies")).to_pyarrow_table().to_pylist()
    pins = DeltaTable(warehouse.delta_location("pins")).to_pyarrow_table().to_pylist()
    want = expected_direct(idx)
    got = {(r["snapshot_uri"], r["target_uri"]): {"relation": r["relation"], "files": r["files"],
                                                  "directories": r["directories"], "bytes": r["bytes"],
                                                  "kind": r["target_kind"]}
           for r in deps if r["dependency"] == "direct"}
    assert got == want
    assert result["direct_rows"] == len(want) and result["transitive_rows"] == len(deps) - len(want) > 0
    # pins hold the same edges, partitioned by the target's unit
    key = ("snapshot_uri", "target_uri", "relation", "dependency", "depth", "files", "bytes")
    assert sorted(tuple(r[k] for k in key) for r in pins) == sorted(tuple(r[k] for k in key) for r in deps)
    for r in pins:
        assert r["target_uri"].startswith(r["root"] + "/") if r["root"] else r["root_id"] == "external"
    info = {s["uri"]: s for s in idx.snapshots}
    for r in deps:
        s = info[r["snapshot_uri"]]
        assert (r["root"], r["job_dir"], r["snapshot_checkpoint_id"]) == (s["root"], s["job_dir"], s["checkpoint_id"])
        assert r["run_id"] == result["run_id"]
    runs = DeltaTable(warehouse.delta_location("chains_runs")).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["status"], r["unparsed_snapshots"], r["airflow_run_id"]) for r in runs] == [
        (result["run_id"], "incomplete", 1, "dag-1")]
    assert dict(runs[0]["source_versions"]) == {"snapshots": 0, "references": 0, "files": 0}


def test_findings_follow_the_rules(synthetic):
    idx, rows = synthetic["idx"], synthetic["rows"]
    got: dict[str, set] = {}
    for r in rows:
        if r["severity"] == "error" and r["check"] != "snapshot":
            got.setdefault(r["snapshot_uri"], set()).add((r["check"], r["subject"]))
    want = expected_findings(idx)
    assert got == want
    assert {c for v in want.values() for c, _ in v} >= {"file_exists", "relative_resolves", "file_size",
                                                        "file_unverifiable", "metadata_parses"}
    warnings = {(r["snapshot_uri"], r["subject"]) for r in rows if r["check"] == "cross_directory"}
    assert warnings == {k for k, v in expected_direct(idx).items() if v["relation"] in FOREIGN_RELATIONS}
    summaries = {r["snapshot_uri"]: r for r in rows if r["check"] == "snapshot"}
    assert set(summaries) == {s["uri"] for s in idx.snapshots}
    for s, r in summaries.items():
        assert r["restorable"] == (s not in want)
        assert r["severity"] == ("error" if s in want else "warning" if any(w[0] == s for w in warnings) else "ok")


def test_job_health_and_exit_status(synthetic):
    idx, jobs, want = synthetic["idx"], synthetic["jobs"], expected_findings(synthetic["idx"])
    by_location: dict[str, list[dict]] = {}
    for s in idx.snapshots:
        by_location.setdefault(job_location(s["root"], s["job_dir"]), []).append(s)
    assert {j["location"] for j in jobs} == set(by_location)
    unrestorable = set()
    for j in jobs:
        snaps = sorted(by_location[j["location"]], key=lambda s: (s["snapshot_type"] == "checkpoint",
                                                                   s["checkpoint_id"] or s["dir_checkpoint_id"] or -1))
        newest = snaps[-1]["uri"]
        good = [s["uri"] for s in snaps if s["uri"] not in want]
        assert (j["newest_uri"], j["newest_restorable"], j["latest_restorable_uri"]) == (
            newest, newest not in want, good[-1] if good else None), j["location"]
        if j["kind"] == "job" and newest in want:
            unrestorable.add(newest)
    result = synthetic["result"]
    assert unrestorable, "the synthetic store should leave some job without a restorable newest checkpoint"
    assert synthetic["code"] == 1 and result["status"] == "unrestorable"
    assert {u["newest_uri"] for u in result["unrestorable"]} == unrestorable
    assert result["jobs_unrestorable"] == len(unrestorable)
    # the Result's counts are those of the rows it wrote
    rows = synthetic["rows"]
    summaries = [r for r in rows if r["check"] == "snapshot"]
    assert (result["snapshots"], result["snapshots_with_errors"], result["snapshots_with_warnings"]) == (
        len(idx.snapshots), sum(r["severity"] == "error" for r in summaries),
        sum(r["severity"] == "warning" for r in summaries))
    by_check: dict[str, int] = {}
    for r in rows:
        if r["check"] != "snapshot":
            by_check[r["check"]] = by_check.get(r["check"], 0) + 1
    assert result["findings"] == by_check and len(by_check) >= 5
    assert result["jobs"] == len(jobs)
    assert synthetic["chains"]["status"] == "incomplete" and synthetic["chains"]["unparsed_snapshots"] == 1


def test_explain_cli(synthetic, capsys):
    idx, warehouse = synthetic["idx"], synthetic["warehouse"]
    parent = next(p for j, p in idx.chains.items() if p)
    job = f"s3://bucket/store/checkpoints/{parent}"
    users = {r["snapshot_uri"] for r in idx.references if r["file_uri"].startswith(job + "/")}
    assert cli_main(["explain", job, "--warehouse", warehouse.uri, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["would_break"]) == users and report["schema_version"] == 1
    assert any("could not be parsed" in c for c in report["caveats"])
    # the unparsed _metadata makes every answer uncertain: --check refuses to vouch
    assert cli_main(["explain", job, "--warehouse", warehouse.uri, "--check"]) == EXIT_REFERENCED
    text = capsys.readouterr().out
    assert "Referenced directly by" in text and "CAVEAT" in text
    snap = sorted(users)[0]
    assert cli_main(["explain", snap, "--warehouse", warehouse.uri]) == 0
    text = capsys.readouterr().out
    assert text.startswith("checkpoint ") and "Needs " in text and "Latest validation" in text
    assert cli_main(["explain", job, "--warehouse", str(synthetic["base"] / "nowhere")]) == 1
    assert "run index_checkpoints first" in capsys.readouterr().err


def test_entry_points_usage_and_config_errors(synthetic, tmp_path):
    empty = str(tmp_path / "empty")
    assert chains_main(["--warehouse", empty]) == 2
    assert validate_main(["--warehouse", empty]) == 2
    overlapping = ["--roots", f"{tmp_path}/a,{tmp_path}/a/b"]
    assert validate_main(["--warehouse", synthetic["warehouse"].uri, *overlapping]) == 2
    assert validate_main(["--warehouse", "ftp://nope/wh"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        validate_main(["--help"])
    assert exit_info.value.code == 0


@pytest.mark.timeout(900)
def test_quality_suite_failure_is_an_internal_failure(spark, tmp_path):
    """An index that breaks its own invariants (a listed object twice) must not be trusted."""
    idx = synthetic_index(5, "s3://bucket/small", jobs=2)
    warehouse = Warehouse(str(tmp_path / "wh"))
    write_index(spark, warehouse, idx)
    dup = pa.Table.from_pylist(idx.files[:1], schema=FILES.schema)
    DeltaSparkEngine().write(spark.createDataFrame(dup), warehouse, FILES, mode="append")
    # Audited as a run's cut: readers ignore commits no succeeded index run names.
    audit_cut(warehouse, {n: delta_log.latest_version(warehouse, n) for n in ("snapshots", "references", "files")})
    out = tmp_path / "result.json"
    assert validate_main(["--warehouse", warehouse.uri, "--result-json", str(out)]) == 3
    result = json.loads(out.read_text())
    assert result["status"] == "quality_failed" and result["quality_success"] is False
    assert any(f.startswith("files: expect_column_values_to_be_unique") for f in result["quality_failures"])
    runs = DeltaTable(warehouse.delta_location("validation_runs")).to_pyarrow_table().to_pylist()
    assert runs[-1]["status"] == "quality_failed"


def test_derived_tables_are_bucketed_like_the_index(spark, synthetic):
    """dependencies, pins, validation_results and validation_jobs are partitioned by (root_id, bucket)
    with the bucket computed in Spark exactly as job_bucket() computes it in Python."""
    from statekeeper.tables.catalog import job_bucket
    from statekeeper.tables.spark import bucket_of

    names = ["job-a", "ä/ß-日本", ".", "7f3a9c0e1b2d4f6a8c0e1b2d4f6a8c0e", ""]
    got = dict(spark.createDataFrame([(n,) for n in names], "job_dir string")
               .select("job_dir", bucket_of("job_dir").alias("b")).collect())
    assert got == {n: job_bucket(n) for n in names}

    warehouse = synthetic["warehouse"]
    for name in ("dependencies", "pins", "validation_results", "validation_jobs"):
        dt = DeltaTable(warehouse.delta_location(name))
        assert dt.metadata().partition_columns == ["root_id", "bucket"], name
        rows = dt.to_pyarrow_table().to_pylist()
        assert rows, name
        assert all(r["bucket"] == job_bucket(r["job_dir"]) for r in rows), name
        # one data file per (root_id, bucket), not one per job directory
        partitions = {(r["root_id"], r["bucket"]) for r in rows}
        assert len(dt.file_uris()) == len(partitions), name


def test_pinned_inputs_name_derived_tables_of_another_cut(synthetic, tmp_path):
    """dependencies/pins computed from the cut read are fresh; once a newer index cut exists,
    both are named stale with the versions chains read and the cut's."""
    import shutil

    from statekeeper.jobs.inputs import pin_inputs
    from statekeeper.tables.reader import TableReader

    sources = ("snapshots", "references", "files")
    fresh = pin_inputs(synthetic["warehouse"], sources, ("inline_state", "dependencies", "pins"))
    assert fresh.stale == () and set(fresh.optional) >= {"dependencies", "pins"}

    copy = Warehouse(str(tmp_path / "wh"))
    shutil.copytree(synthetic["warehouse"].uri.removeprefix("file://"), tmp_path / "wh")
    one = TableReader(copy).read("files").slice(0, 1)
    version = append_rows(copy, FILES, one).version
    audit_cut(copy, {**fresh.versions, "files": version}, run_id="newer")
    stale = pin_inputs(copy, sources, ("dependencies", "pins")).stale
    assert stale == (f"dependencies (files v0 (now v{version}))", f"pins (files v0 (now v{version}))")
