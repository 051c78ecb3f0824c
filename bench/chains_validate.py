"""Benchmark: the chains and validation jobs vs the bare Spark work they cannot avoid.

Input: synthetic index tables (snapshots, references, files) of a store with --jobs job
directories restored from each other in chains, --checkpoints retained checkpoints per job and
about --refs references per checkpoint (own shared/ files, the parent job's shared/ files,
relative files, some segments), written once to a cached warehouse under
$STATEKEEPER_CACHE/bench/chains_validate (never in the repository).

Measured in one run and one local SparkSession (warmed up first):
* baseline   - read `references` and `files` through the same table engine, join every reference
               with the listing, aggregate per snapshot, write nothing (`noop`): the minimum work
               of a job that checks references against a listing;
* chains     - ComputeChains (direct dependencies, lineage, writing dependencies + pins);
* validate   - ValidateCheckpoints without the GX suite (checks, per-job health, two tables);
* validate+gx- the same with the Great Expectations suite (--with-gx);
* explain    - `statekeeper explain` of one job directory (Delta log + partition-pruned parquet
               reads, no Spark) vs deltalake reading all of `references` (explain_baseline).
Ratios are job / baseline (lower is better).

    python -m bench chains_validate [--jobs 200] [--checkpoints 10] [--refs 200] [--repeat 1]
                                    [--with-gx] [--cores 2]
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench import cache_dir

NAME = "chains_validate"
DESCRIPTION = "chains and validation jobs vs a bare references-join-listing Spark job (synthetic index)"
REPO = Path(__file__).resolve().parents[1]
BUILD_VERSION = 3   # 3: audited as an index run's cut, reference_count = the snapshot's reference rows
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _build(warehouse_dir: Path, jobs: int, checkpoints: int, refs: int, spark) -> dict:
    """Write the synthetic index tables; returns counts."""
    import pyarrow as pa

    from statekeeper.layout.classify import classify
    from statekeeper.storage.roots import root_id_of
    from statekeeper.tables import Warehouse
    from statekeeper.index.job import IndexResult
    from statekeeper.index.unit import UnitStats
    from statekeeper.tables.catalog import FILES, INDEX_RUNS, REFERENCES, SNAPSHOTS, job_bucket
    from statekeeper.tables.vocabulary import IndexRunStatus
    from statekeeper.tables.engine import DeltaRsEngine

    rng = random.Random(42)
    root = f"file://{warehouse_dir.parent}/store/checkpoints"
    rid = root_id_of(root)
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(jobs)]
    pool = max(refs, 10)
    shared = {j: [f"{root}/{j}/shared/{rng.getrandbits(64):016x}" for _ in range(pool)] for j in ids}
    sizes: dict[str, int] = {}
    snaps, references = [], []
    for i, job in enumerate(ids):
        parent = ids[rng.randrange(i)] if i and rng.random() < 0.7 else None
        for n in range(checkpoints):
            cid = 100 * i + n + 1
            meta = f"{root}/{job}/chk-{cid}/_metadata"
            own = rng.sample(shared[job], k=int(refs * 0.7))
            inherited = rng.sample(shared[parent], k=int(refs * 0.25)) if parent else []
            relative = [f"{root}/{job}/chk-{cid}/{rng.getrandbits(64):016x}" for _ in range(max(1, refs // 20))]
            named = own + inherited + relative
            for k, f in enumerate(named):
                size = sizes.setdefault(f, rng.randrange(1_000, 5_000_000))
                rel = f in relative
                segment = not rel and k % 17 == 0
                loc = classify(f[len(root) + 1:])
                references.append({
                    "snapshot_uri": meta, "root": root, "root_id": rid, "job_dir": job, "bucket": job_bucket(job),
                    "snapshot_job_id": job,
                    "snapshot_checkpoint_id": cid, "file_uri": f, "stored_path": f.rsplit("/", 1)[1] if rel else f,
                    "handle_kind": "RELATIVE_STREAM_STATE_HANDLE" if rel else (
                        "SEGMENT_FILE_HANDLE" if segment else "FILE_STREAM_STATE_HANDLE"),
                    "scope": "exclusive" if rel else "shared", "stated_size": size // 2 if segment else size,
                    "segment_start": size // 4 if segment else None, "segment_length": size // 2 if segment else None,
                    "operator_id": "0" * 32, "operator_name": "op", "operator_uid": None, "subtask": k % 4,
                    "slot": "managed_keyed", "role": "shared", "local_name": None, "file_root": root,
                    "file_job_dir": loc.job_dir, "file_job_id": loc.job_id, "file_kind": loc.kind.value})
            snaps.append({"uri": meta, "root": root, "root_id": rid, "job_dir": job, "bucket": job_bucket(job), "job_id": job,
                          "layout_kind": "checkpoint_metadata", "dir_checkpoint_id": cid, "status": "ok",
                          "error": None, "metadata_version": 6, "checkpoint_id": cid, "snapshot_type": "checkpoint",
                          "snapshot_format": None, "sharing": "forward_backward", "metadata_size": 10_000,
                          "metadata_mtime": T0, "metadata_etag": "x", "inline_bytes": 0, "inline_handle_count": 0,
                          "reference_count": len(named), "referenced_file_count": len(named), "referenced_bytes": 0,
                          "operator_count": 1, "operators": [], "parser_version": "bench", "index_run_id": "bench"})
    files = []
    for f, size in sizes.items():
        loc = classify(f[len(root) + 1:])
        files.append({"uri": f, "root": root, "root_id": rid, "job_dir": loc.job_dir,
                      "bucket": job_bucket(loc.job_dir), "relative_path": f[len(root) + 1:],
                      "kind": loc.kind.value, "job_id": loc.job_id, "checkpoint_id": loc.checkpoint_id,
                      "size": size if rng.random() > 0.001 else size // 3, "mtime": T0, "etag": "e",
                      "index_run_id": "bench"})
    warehouse = Warehouse(str(warehouse_dir))
    engine = DeltaRsEngine()
    versions = {}
    for spec, rows in ((SNAPSHOTS, snaps), (REFERENCES, references), (FILES, files)):
        table = pa.Table.from_pylist(rows, schema=spec.schema)
        versions[spec.name] = engine.write(spark.createDataFrame(table).repartition(8), warehouse, spec,
                                           mode="overwrite").version
    # The index run's commit point: the audit row naming these versions (statekeeper.tables.cut).
    now = datetime.now(timezone.utc)
    run = IndexResult(run_id="bench", status=IndexRunStatus.SUCCEEDED, started_at=now, finished_at=now,
                      warehouse=warehouse.uri, table_versions=versions, roots=(root,), engine=engine.name,
                      stats=UnitStats())
    engine.append_rows(spark, warehouse, INDEX_RUNS, run.audit_row(INDEX_RUNS, {
        "statekeeper_version": "bench", "airflow_run_id": None, "data_interval_start": None,
        "data_interval_end": None, "options": None}))
    return {"snapshots": len(snaps), "references": len(references), "files": len(files), "jobs": jobs,
            "sample_job": f"{root}/{ids[0]}"}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench chains_validate", description=DESCRIPTION)
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--checkpoints", type=int, default=10)
    p.add_argument("--refs", type=int, default=200)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--with-gx", action="store_true")
    p.add_argument("--cores", type=int, default=2)
    args = p.parse_args(argv)
    sys.path[:0] = [str(REPO / "include"), str(REPO)]

    from deltalake import DeltaTable

    from statekeeper.chains.explain import explain
    from statekeeper.chains.job import ComputeChains
    from statekeeper.storage import StorageConfig
    from statekeeper.tables import Warehouse
    from statekeeper.tables.engine import DeltaRsEngine
    from statekeeper.validate.job import ValidateCheckpoints
    from statekeeper.validate.options import ValidateOptions
    from tests.plugins.spark import build_local_session

    work = Path(tempfile.mkdtemp(prefix="statekeeper-bench-"))
    spark = build_local_session(work, app_name="statekeeper-bench", cores=args.cores)
    try:
        key = f"v{BUILD_VERSION}-j{args.jobs}-c{args.checkpoints}-r{args.refs}"
        home = cache_dir(NAME, key)
        marker = home / "built.json"
        if not marker.exists():
            shutil.rmtree(home / "warehouse", ignore_errors=True)
            counts = _build(home / "warehouse", args.jobs, args.checkpoints, args.refs, spark)
            marker.write_text(json.dumps(counts))
        counts = json.loads(marker.read_text())
        warehouse = Warehouse(str(home / "warehouse"))
        engine = DeltaRsEngine()
        storage = StorageConfig()

        def baseline() -> None:
            from pyspark.sql import functions as F

            refs = engine.read(spark, warehouse, "references")
            files = engine.read(spark, warehouse, "files").select(F.col("uri").alias("file_uri"), "size")
            (refs.join(files, "file_uri", "left").groupBy("snapshot_uri")
             .agg(F.count("size").alias("present"), F.count(F.lit(1)).alias("n"))
             .write.format("noop").mode("overwrite").save())

        def chains() -> None:
            ComputeChains(spark).warehouse(warehouse).storage(storage).execute()

        def validate(gx: bool) -> None:
            (ValidateCheckpoints(spark).warehouse(warehouse).storage(storage)
             .configure(ValidateOptions(quality_suite=gx)).execute())

        # warm up: Python workers, JIT, table caches
        baseline()
        chains()
        results: dict[str, list[float]] = {"baseline": [], "chains": [], "validate": [], "validate+gx": [],
                                           "explain": [], "explain_baseline": []}
        for _ in range(args.repeat):
            results["baseline"].append(_timed(baseline))
            results["chains"].append(_timed(chains))
            results["validate"].append(_timed(lambda: validate(False)))
            if args.with_gx:
                results["validate+gx"].append(_timed(lambda: validate(True)))
            results["explain"].append(_timed(lambda: explain(counts["sample_job"], warehouse)))
            results["explain_baseline"].append(_timed(
                lambda: DeltaTable(warehouse.delta_location("references")).to_pyarrow_table()))
        best = {k: min(v) for k, v in results.items() if v}
        report = {"input": counts, "seconds": {k: round(v, 2) for k, v in best.items()},
                  "ratios": {"chains/baseline": round(best["chains"] / best["baseline"], 2),
                             "validate/baseline": round(best["validate"] / best["baseline"], 2),
                             **({"validate+gx/baseline": round(best["validate+gx"] / best["baseline"], 2)}
                                if "validate+gx" in best else {}),
                             "explain/full_references_read": round(best["explain"] / best["explain_baseline"], 2)}}
        for name, value in report["seconds"].items():
            print(f"{name:18} {value:8.2f} s")
        for name, value in report["ratios"].items():
            print(f"{name:28} {value:6.2f}")
        print(json.dumps(report))
        return 0
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
