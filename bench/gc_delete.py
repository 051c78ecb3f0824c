"""Benchmark: the GC deleter, driven as the GC job drives it, vs plain deletion loops.

Measured in one run, each way on its own freshly populated bucket/prefix (population is setup, not
timed; moto does a few hundred puts/s, so populating dominates the run's wall time):

S3 (a moto server on loopback started by the bench):
* sequential      - a single-threaded boto3 `delete_object` loop, measured on a subset
                    (--sequential-objects, default 5,000 keys) and reported as keys/s;
* raw batches     - a bare multi-threaded `DeleteObjects` script: 1,000-key batches, --threads threads;
* raw + listing   - the same script doing the re-check work ours does: --threads threads each list one
                    prefix (ListObjectsV2 pages), compare size/etag with the plan, and delete what matches
                    in 1,000-key batches (the floor for a deleter that re-checks by listing);
* ours            - `Deleter.run` inside `mapInArrow` on a local Spark session (local[--cores]), the
                    planned items in a DataFrame range-partitioned by prefix (--partitions, default 2;
                    requests_in_flight 4, no rate limit). It also re-checks every key before deleting it (ListObjectsV2 pages), which
                    the other two do not.
Local disk: --objects small files in a temp dir, `find DIR -type f -delete` vs ours (same Spark path,
lstat re-check + unlink) on an identical tree.

Ratios are ours / baseline in keys/s (higher is better). Spark session start and a warm-up job are not
counted; the Spark job of ours (reading the plan, the tasks, collecting outcome counts) is.

    python -m bench gc_delete [--objects 100000] [--sequential-objects 5000] [--threads 8]
                              [--dirs 20] [--cores 2] [--skip-s3] [--skip-local]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NAME = "gc_delete"
DESCRIPTION = "GC deleter via Spark mapInArrow vs sequential/raw-batch S3 deletes and find -delete"
REPO = Path(__file__).resolve().parents[1]

_RESULT_FIELDS = ("uri", "outcome", "message", "retries")


def _paths() -> None:
    for p in (str(REPO), str(REPO / "include")):
        if p not in sys.path:
            sys.path.insert(0, p)


def _spark(cores: int, work: Path):
    _paths()
    from tests.plugins.spark import build_local_session

    return build_local_session(work, app_name="statekeeper-bench-gc-delete", cores=cores)


def _rate(keys: int, seconds: float) -> float:
    return keys / seconds if seconds > 0 else float("inf")


def _line(label: str, keys: int, seconds: float, note: str = "") -> None:
    print(f"  {label:34} {keys:8d} keys {seconds:8.2f} s {_rate(keys, seconds):10.0f} keys/s  {note}", flush=True)


# -- plan -> Spark -> Deleter -----------------------------------------------------------------------


def _write_plan(infos, path: Path) -> None:
    """The planned items as the GC job would read them: one row per file, with its prefix."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"uri": [], "size": [], "mtime": [], "etag": [], "delete_order": [], "prefix": []}
    for info in infos:
        rows["uri"].append(info.uri)
        rows["size"].append(info.size)
        rows["mtime"].append(info.mtime)
        rows["etag"].append(info.etag)
        rows["delete_order"].append(1)
        rows["prefix"].append(info.uri.rsplit("/", 1)[0])
    table = pa.table({
        "uri": pa.array(rows["uri"], pa.string()), "size": pa.array(rows["size"], pa.int64()),
        "mtime": pa.array(rows["mtime"], pa.timestamp("us", tz="UTC")), "etag": pa.array(rows["etag"], pa.string()),
        "delete_order": pa.array(rows["delete_order"], pa.int32()), "prefix": pa.array(rows["prefix"], pa.string()),
    })
    pq.write_table(table, path)


def _delete_fn(storage, roots: list[str], settings):
    """The mapInArrow function, built in a closure so cloudpickle ships it by value (workers import
    `statekeeper`, not the bench package)."""
    def run(batches):
        import pyarrow as pa

        from statekeeper.gc.deleter import Deleter, PlannedDelete

        def items():
            for batch in batches:
                for row in batch.to_pylist():
                    yield PlannedDelete(row["uri"], row["size"], row["mtime"], row["etag"], row["delete_order"])

        out: dict[str, list] = {name: [] for name in _RESULT_FIELDS}
        for result in Deleter(storage, roots, settings).run(items()):
            out["uri"].append(result.uri)
            out["outcome"].append(str(result.outcome))
            out["message"].append(result.message)
            out["retries"].append(result.retries)
            if len(out["uri"]) >= 10_000:
                yield pa.RecordBatch.from_pydict(out)
                out = {name: [] for name in _RESULT_FIELDS}
        if out["uri"]:
            yield pa.RecordBatch.from_pydict(out)
    return run


def _ours(spark, plan: Path, storage, roots: list[str], partitions: int) -> tuple[float, dict[str, int], list[str]]:
    from pyspark.sql import functions as F

    from statekeeper.gc.deleter import DeleteSettings

    settings = DeleteSettings(requests_in_flight=4, max_deletes_per_second=None)
    t = time.perf_counter()
    # Range partitioning keeps whole prefixes together (as the GC job's root/bucket partitioning does)
    # while balancing the tasks; hash partitioning of 20 prefixes into few tasks leaves stragglers.
    df = spark.read.parquet(str(plan)).repartitionByRange(partitions, F.col("prefix")).drop("prefix")
    results = df.mapInArrow(_delete_fn(storage, roots, settings),
                            "uri string, outcome string, message string, retries long")
    rows = results.groupBy("outcome").agg(F.count("*").alias("n"), F.first("message").alias("example")).collect()
    seconds = time.perf_counter() - t
    counts = {r["outcome"]: r["n"] for r in rows}
    examples = [f"{r['outcome']}: {r['example']}" for r in rows if r["example"]]
    return seconds, counts, examples


# -- S3 ---------------------------------------------------------------------------------------------


def _populate(client, bucket: str, keys: list[str], threads: int = 16) -> float:
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x" * 64), keys, chunksize=256))
    return time.perf_counter() - t


def _keys(prefix: str, count: int, dirs: int) -> list[str]:
    return [f"{prefix}/job-{i % dirs:03d}/shared/{uuid.uuid4()}" for i in range(count)]


def run_s3(args, spark, work: Path) -> dict:
    _paths()
    from statekeeper.storage.s3 import S3FileIO, make_s3_client
    from tests.plugins.s3 import MotoServer, make_bucket

    server = MotoServer(work / "moto.log")
    try:
        config = server.config(max_pool_connections=32)
        client = make_s3_client(config, max_pool_connections=32)
        n, n_seq = args.objects, min(args.sequential_objects, args.objects)

        # Warm the Spark Python workers and the deleter's imports on a few keys (not counted).
        warm = make_bucket(config, "bench-warm")
        _populate(client, warm, _keys("cp", 50, 2))
        _write_plan(list(S3FileIO(config).list(f"s3://{warm}/cp")), work / "warm.parquet")
        _ours(spark, work / "warm.parquet", config, [f"s3://{warm}/cp"], args.partitions)

        ways = ("seq", "raw", "rawlist", "ours")
        buckets = {way: make_bucket(config, f"bench-{way}") for way in ways}
        keys = {way: _keys("cp", n_seq if way == "seq" else n, args.dirs) for way in ways}
        for way in ways:
            s = _populate(client, buckets[way], keys[way])
            print(f"populated s3://{buckets[way]}/cp with {len(keys[way])} objects in {s:.0f} s "
                  f"({len(keys[way]) / s:.0f} puts/s; setup, not timed)", flush=True)

        # (a) sequential delete_object loop
        t = time.perf_counter()
        for k in keys["seq"]:
            client.delete_object(Bucket=buckets["seq"], Key=k)
        seq_s = time.perf_counter() - t

        # (b) raw multi-threaded DeleteObjects, 1000-key batches
        batches = [keys["raw"][i:i + 1000] for i in range(0, n, 1000)]

        def delete_batch(batch: list[str]) -> int:
            response = client.delete_objects(Bucket=buckets["raw"],
                                             Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            return len(response.get("Errors", ()))

        t = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            errors = sum(pool.map(delete_batch, batches))
        raw_s = time.perf_counter() - t
        assert errors == 0, f"raw DeleteObjects reported {errors} per-key errors"

        # (b') raw + re-check by listing: per prefix, list, compare with the plan, delete in batches
        planned = {i.uri.split("/", 3)[3]: (i.size, i.etag) for i in S3FileIO(config).list(f"s3://{buckets['rawlist']}/cp")}
        prefixes = sorted({k.rsplit("/", 1)[0] + "/" for k in planned})

        def list_and_delete(prefix: str) -> int:
            matched: list[str] = []
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=buckets["rawlist"], Prefix=prefix,
                                                                         Delimiter="/"):
                for obj in page.get("Contents", ()):
                    plan = planned.get(obj["Key"])
                    if plan is not None and plan == (obj["Size"], obj["ETag"].strip('"')):
                        matched.append(obj["Key"])
            for i in range(0, len(matched), 1000):
                client.delete_objects(Bucket=buckets["rawlist"], Delete={
                    "Objects": [{"Key": k} for k in matched[i:i + 1000]], "Quiet": True})
            return len(matched)

        t = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            deleted = sum(pool.map(list_and_delete, prefixes))
        rawlist_s = time.perf_counter() - t
        assert deleted == n, (deleted, n)

        # (c) ours: plan (setup: the index's listing) -> Spark mapInArrow -> Deleter.run
        _write_plan(list(S3FileIO(config).list(f"s3://{buckets['ours']}/cp")), work / "plan-s3.parquet")
        ours_s, counts, examples = _ours(spark, work / "plan-s3.parquet", config,
                                         [f"s3://{buckets['ours']}/cp"], args.partitions)
        assert counts == {"deleted": n}, (counts, examples)
        for way in ways:
            left = sum(1 for _ in S3FileIO(config).list(f"s3://{buckets[way]}/cp"))
            assert left == 0, f"{left} objects left in s3://{buckets[way]}/cp"
    finally:
        server.stop()

    print(f"S3 (moto on loopback), {n} objects in {args.dirs} prefixes:", flush=True)
    _line("(a) sequential delete_object", n_seq, seq_s, f"(measured on {n_seq} keys)")
    _line(f"(b) raw DeleteObjects x{args.threads} threads", n, raw_s, "(1000-key batches, no re-check)")
    _line(f"(b') raw list+DeleteObjects x{args.threads}", n, rawlist_s, "(same re-check by listing, no framework)")
    _line(f"(c) ours: Spark local[{args.cores}] + Deleter", n, ours_s,
          f"({args.partitions} partitions by prefix range, 4 requests in flight each, re-check by listing)")
    ours_rate = _rate(n, ours_s)
    r_seq, r_raw = ours_rate / _rate(n_seq, seq_s), ours_rate / _rate(n, raw_s)
    r_rawlist = ours_rate / _rate(n, rawlist_s)
    print(f"  ratios (keys/s): ours/sequential {r_seq:.2f}   ours/raw {r_raw:.2f}   ours/(raw+listing) {r_rawlist:.2f}",
          flush=True)
    return {"s3_objects": n, "s3_sequential_keys": n_seq, "s3_sequential_keys_per_s": round(_rate(n_seq, seq_s), 1),
            "s3_raw_keys_per_s": round(_rate(n, raw_s), 1), "s3_ours_keys_per_s": round(ours_rate, 1),
            "s3_raw_listing_keys_per_s": round(_rate(n, rawlist_s), 1),
            "ratio_ours_sequential": round(r_seq, 3), "ratio_ours_raw": round(r_raw, 3),
            "ratio_ours_raw_listing": round(r_rawlist, 3)}


# -- local ------------------------------------------------------------------------------------------


def _make_tree(base: Path, count: int, dirs: int) -> None:
    for d in range(dirs):
        (base / f"job-{d:03d}" / "shared").mkdir(parents=True)
    payload = b"x" * 64
    for i in range(count):
        with open(base / f"job-{i % dirs:03d}" / "shared" / f"f{i:07d}", "wb") as f:
            f.write(payload)


def run_local(args, spark, work: Path) -> dict:
    _paths()
    from statekeeper.storage import LocalFileIO, StorageConfig

    n = args.objects
    find_root, ours_root, warm_root = work / "local-find" / "cp", work / "local-ours" / "cp", work / "local-warm" / "cp"
    _make_tree(warm_root, 100, 2)
    _write_plan(list(LocalFileIO().list(str(warm_root))), work / "warm-local.parquet")
    _ours(spark, work / "warm-local.parquet", StorageConfig(), [str(warm_root)], args.partitions)

    t = time.perf_counter()
    _make_tree(find_root, n, args.dirs)
    _make_tree(ours_root, n, args.dirs)
    print(f"created 2 x {n} files in {time.perf_counter() - t:.0f} s (setup, not timed)", flush=True)
    _write_plan(list(LocalFileIO().list(str(ours_root))), work / "plan-local.parquet")
    subprocess.run(["sync"], check=False)

    t = time.perf_counter()
    subprocess.run(["find", str(find_root), "-type", "f", "-delete"], check=True)
    find_s = time.perf_counter() - t
    ours_s, counts, examples = _ours(spark, work / "plan-local.parquet", StorageConfig(), [str(ours_root)],
                                     args.partitions)
    assert counts == {"deleted": n}, (counts, examples)
    for root in (find_root, ours_root):
        left = sum(len(files) for _, _, files in os.walk(root))
        assert left == 0, f"{left} files left below {root}"

    print(f"local disk ({work}), {n} files in {args.dirs} directories:", flush=True)
    _line("find -type f -delete", n, find_s)
    _line(f"ours: Spark local[{args.cores}] + Deleter", n, ours_s, "(lstat re-check + unlink, 16 threads per task)")
    ratio = _rate(n, ours_s) / _rate(n, find_s)
    print(f"  ratio (keys/s): ours/find {ratio:.2f}", flush=True)
    return {"local_objects": n, "local_find_keys_per_s": round(_rate(n, find_s), 1),
            "local_ours_keys_per_s": round(_rate(n, ours_s), 1), "ratio_ours_find": round(ratio, 3)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench gc_delete", description=DESCRIPTION)
    p.add_argument("--objects", type=int, default=100_000, help="objects per way (S3 raw/ours, local)")
    p.add_argument("--sequential-objects", type=int, default=5_000,
                   help="keys deleted by the sequential delete_object loop (reported as keys/s)")
    p.add_argument("--threads", type=int, default=8, help="threads of the raw DeleteObjects script")
    p.add_argument("--dirs", type=int, default=20, help="directories (prefixes) the objects are spread over")
    p.add_argument("--partitions", type=int, default=2, help="Spark partitions of the plan (ranges of prefixes)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--skip-local", action="store_true")
    args = p.parse_args(argv)
    summary: dict = {"bench": NAME}
    with tempfile.TemporaryDirectory(prefix="statekeeper-bench-gc-delete-") as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        spark = _spark(args.cores, work)
        print(f"Spark session started in {time.perf_counter() - t:.1f} s (not counted)", flush=True)
        try:
            if not args.skip_s3:
                summary.update(run_s3(args, spark, work))
            if not args.skip_local:
                summary.update(run_local(args, spark, work))
        finally:
            spark.stop()
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
