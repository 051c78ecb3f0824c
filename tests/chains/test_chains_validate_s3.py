"""Chains, explain and validation against a real S3 endpoint (SeaweedFS on loopback).

Stores in the bucket (one Flink version):
* `intact`  - the chain_claim store relocated into the bucket (every `_metadata` rewritten, so all
  references are s3:// objects);
* `damaged` - the same, then one of A's shared SSTs that C's newest checkpoint uses is deleted and
  one of C's own files is overwritten with half its bytes;
* `raw`     - the chain_noclaim store uploaded as is: its `_metadata` still name the local cache
  (`file://`), i.e. files outside every indexed root. Validation may stat job A's local directory
  (given as a root) and nothing else: A's files are verified, B's and C's are unverifiable.
Expected references come from Flink's own reading of the original `_metadata` files.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.inspect.explain import explain
from statekeeper.chains.job import SUCCEEDED, ComputeChains
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from statekeeper.validate.job import UNRESTORABLE, ValidateCheckpoints
from statekeeper.validate.options import ValidateOptions
from tests.chains.support import oracle_references, relocate_store, store_roots
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

VERSION = "2.3.0" if "2.3.0" in harness.FLINK_VERSIONS else harness.FLINK_VERSIONS[-1]


def uri(p) -> str:
    return normalize_uri(str(p))


@pytest.fixture(scope="module")
def s3_run(spark, flink_fixture, s3_config, s3_upload_tree):
    chain, noclaim = flink_fixture(VERSION, "chain_claim"), flink_fixture(VERSION, "chain_noclaim")
    truth = oracle_references(VERSION, chain.metadata_files())
    bucket = make_bucket(s3_config, "chains")
    fio = RoutingFileIO(s3_config)
    old = uri(chain.root)
    intact = relocate_store(chain.root, f"s3://{bucket}/intact", fio)
    damaged = relocate_store(chain.root, f"s3://{bucket}/damaged", fio)
    raw = f"s3://{bucket}/raw"
    s3_upload_tree(noclaim.root, raw)

    def moved(base: str, u: str) -> str:
        return base + u[len(old):]

    c_newest = uri(Path(chain.job("C")["retained_checkpoints"][-1]) / "_metadata")
    users = lambda f: {m for m, files in truth.items() if f in files}  # noqa: E731
    a_shared = uri(chain.job("A")["job_dir"]) + "/shared/"
    c_shared = uri(chain.job("C")["job_dir"]) + "/shared/"
    gone = min((f for f in truth[c_newest] if f.startswith(a_shared)), key=lambda f: (len(users(f)), f))
    short = min((f for f in truth[c_newest] if f.startswith(c_shared)), key=lambda f: (len(users(f)), f))
    report = fio.delete_many([moved(damaged, gone)])
    assert report.ok and report.deleted
    data = fio.read_bytes(moved(damaged, short))
    fio.write(moved(damaged, short), data[: len(data) // 2])
    expected: dict[str, set[str]] = {}
    for m in users(gone):
        expected.setdefault(moved(damaged, m), set()).add("file_exists")
    for m in users(short):
        expected.setdefault(moved(damaged, m), set()).add("file_size")

    warehouse = Warehouse(f"s3://{bucket}/warehouse", s3_config)
    roots = store_roots(intact) + store_roots(damaged) + store_roots(raw)
    # The chain stores' savepoints dirs are empty, so those S3 prefixes hold no object.
    index = run_index(spark, roots, warehouse, storage=s3_config, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    chains = ComputeChains(spark).warehouse(warehouse).storage(s3_config).execute()
    a_local = uri(noclaim.job("A")["job_dir"])
    # the quality suite runs in the local tests; here the S3 reads and stat calls are what matter
    validation = (ValidateCheckpoints(spark).warehouse(warehouse).storage(s3_config)
                  .configure(ValidateOptions(roots=(a_local,), quality_suite=False)).execute())
    tables = {name: DeltaTable(warehouse.delta_location(name), storage_options=warehouse.storage_options())
              .to_pyarrow_table().to_pylist() for name in ("dependencies", "validation_results")}
    return {"chain": chain, "noclaim": noclaim, "truth": truth, "intact": intact, "damaged": damaged, "raw": raw,
            "moved": moved, "expected": expected, "warehouse": warehouse, "chains": chains,
            "validation": validation, "tables": tables, "a_local": a_local}


def test_chains_on_s3_match_flink(s3_run):
    r = s3_run
    assert r["chains"].status == SUCCEEDED, r["chains"].summary()
    chain, moved, intact = r["chain"], r["moved"], r["intact"]
    jobs = {uri(j["job_dir"]): j["name"] for j in chain.manifest["jobs"]}
    for meta, files in r["truth"].items():
        want = Counter(moved(intact, next(j for j in jobs if f.startswith(j + "/"))) for f in files)
        got = {d["target_uri"]: d["files"] for d in r["tables"]["dependencies"]
               if d["snapshot_uri"] == moved(intact, meta) and d["dependency"] == "direct"}
        assert got == dict(want), meta
    a = moved(intact, uri(chain.job("A")["job_dir"]))
    report = explain(a + "/shared", r["warehouse"])
    users = {moved(intact, m) for m, files in r["truth"].items() if any(f.startswith(uri(chain.job("A")["job_dir"])
                                                                              + "/shared/") for f in files)}
    assert set(report.would_break) == users and not report.caveats
    restored = {moved(intact, uri(Path(d) / "_metadata")) for j in ("B", "B_legacy", "C")
                for d in chain.job(j)["retained_checkpoints"]}
    assert restored <= users


def test_validation_on_s3(s3_run):
    r = s3_run
    v = r["validation"]
    assert v.status == UNRESTORABLE, v.summary()
    rows = r["tables"]["validation_results"]

    def errors(prefix: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for x in rows:
            if x["snapshot_uri"].startswith(prefix + "/") and x["severity"] == "error" and x["check"] != "snapshot":
                out.setdefault(x["snapshot_uri"], set()).add(x["check"])
        return out

    assert errors(r["intact"]) == {}
    assert errors(r["damaged"]) == r["expected"]
    assert r["expected"], "the damage must reach some snapshot"

    # raw upload: references name the local cache. A's are stat'ed (a configured root) and exist;
    # B's and C's lie outside every root: unverifiable, so not restorable (fail closed).
    noclaim, raw = r["noclaim"], r["raw"]
    raw_errors = errors(raw)
    old = uri(noclaim.root)
    for job in ("A", "B", "C"):
        for d in noclaim.job(job)["retained_checkpoints"]:
            s = raw + uri(Path(d) / "_metadata")[len(old):]
            if job == "A":
                assert s not in raw_errors
                assert any(x["snapshot_uri"] == s and x["check"] == "cross_directory" and x["subject"].startswith(
                    r["a_local"]) for x in rows)
            else:
                assert raw_errors[s] == {"file_unverifiable"}, s
    assert v.files_statted > 0


def test_report_reads_the_s3_warehouse_and_publishes_into_it(s3_run, spark, s3_config):
    """The report job's Spark reads of Delta tables on S3 (the suite's other report runs use local warehouses):
    its totals are the tables' own, its verdicts validation's, and the page lands under the S3 warehouse."""
    from statekeeper.report.job import SUCCEEDED as REPORTED, BuildReport
    from statekeeper.report.store import ReportStore

    r = s3_run
    warehouse, validation = r["warehouse"], r["validation"]
    result = BuildReport(spark).warehouse(warehouse).storage(s3_config).progress_interval(0).execute()
    assert result.status == REPORTED, result.summary()
    files = (DeltaTable(warehouse.delta_location("files"), storage_options=warehouse.storage_options())
             .to_pyarrow_table(columns=["size"]).column("size").to_pylist())
    assert (result.files, result.bytes_total) == (len(files), sum(files)) and files
    assert (result.jobs, result.jobs_unrestorable) == (validation.jobs, validation.jobs_unrestorable)
    assert result.jobs_unrestorable > 0 and result.bytes_pinned > 0   # the damaged chain, A's files pinned by B, C
    ref, page = ReportStore(warehouse).page(None)
    assert ref.page_uri == result.report_uri and result.report_uri.startswith(warehouse.uri + "/_reports/")
    assert RoutingFileIO(s3_config).read_bytes(result.report_uri) == page and b"<html" in page.lower()


def test_quality_report_is_published_to_an_s3_warehouse(s3_config, tmp_path):
    from statekeeper.validate.quality import _publish

    bucket = make_bucket(s3_config, "gx")
    warehouse = Warehouse(f"s3://{bucket}/warehouse", s3_config)
    docs = tmp_path / "docs"
    (docs / "static").mkdir(parents=True)
    (docs / "index.html").write_text("<html>index</html>")
    (docs / "static" / "style.css").write_text("body {}")
    results_uri, docs_uri = _publish(warehouse, "val-1", docs, {"files": {"success": True}})
    fio = RoutingFileIO(s3_config)
    assert results_uri == f"s3://{bucket}/warehouse/_reports/validation/runs/val-1/gx_results.json"
    assert docs_uri == f"s3://{bucket}/warehouse/_reports/validation/data_docs/index.html"
    assert fio.read_bytes(docs_uri) == b"<html>index</html>"
    assert fio.exists(f"s3://{bucket}/warehouse/_reports/validation/data_docs/static/style.css")
    assert '"success": true' in fio.read_bytes(results_uri).decode()
