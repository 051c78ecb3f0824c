"""Benchmark: GC's deletion stage, exactly as the GC job runs it, vs plain deletion loops.

Measured in one run, each way on its own freshly populated bucket or directory tree (population is setup, not
timed: the moto server is started with the bench's seeding hook, bench/_moto_server.py, so 100,000 objects
take seconds instead of minutes), the ways interleaved, --repeat times; medians are reported:

S3 (a moto server on loopback started by the bench, enforcing S3's conditional deletes as AWS does):
* sequential      - a single-threaded boto3 `delete_object` loop, measured on a subset (--sequential-objects,
                    default 5,000 keys) and reported as keys/s;
* raw batches     - a bare multi-threaded `DeleteObjects` script: 1,000-key batches, --threads threads, no
                    precondition and no re-check (the fastest anyone can delete, and the least safe);
* raw, pinned     - the same script sending each key's listed ETag (S3's conditional delete, what ours sends):
                    separates what the endpoint spends on checking preconditions from what our client spends;
* ours            - the GC job's deletion stage: `statekeeper.gc.execute.delete_plan` (the plan's rows hash
                    partitioned by root, bucket and directory, `DeleteTask` -> `Deleter` in `mapInArrow`) on a
                    local Spark session (local[--cores]), outcome counts collected. Every key is deleted only
                    while it is the planned version: its ETag rides in the DeleteObjects request (S3's conditional
                    delete), so there is no request before the delete.
With --with-listing also ours with `delete_recheck=listing` (the setting for S3-compatible stores that ignore the
per-key ETag: each directory listed again first) - informative.
Local disk: --objects small files in a temp dir, `find DIR -type f -delete` vs ours (same Spark path, lstat
against the plan + unlink) on an identical tree.

Ratios are ours / baseline in keys/s (higher is better). HTTP requests per key come from moto's access log (one
line per request). Spark session start and a warm-up job are not counted; the Spark job of ours (reading the
plan, the tasks, collecting outcome counts) is.

    python -m bench gc_delete [--objects 100000] [--sequential-objects 5000] [--threads 8] [--dirs 20]
                              [--repeat 3] [--local-repeat 3] [--cores 2] [--skip-s3] [--skip-local] [--with-listing]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NAME = "gc_delete"
DESCRIPTION = "GC deletion stage (delete_plan in Spark) vs sequential/raw-batch S3 deletes and find -delete"
REPO = Path(__file__).resolve().parents[1]


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


class _Tally:
    """Seconds (and requests) per way over the repeats."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.keys: dict[str, int] = {}
        self.requests: dict[str, list[int]] = {}

    def add(self, way: str, keys: int, seconds: float, requests: int | None = None) -> None:
        self.seconds.setdefault(way, []).append(seconds)
        self.keys[way] = keys
        if requests is not None:
            self.requests.setdefault(way, []).append(requests)

    def rate(self, way: str) -> float:
        return _rate(self.keys[way], statistics.median(self.seconds[way]))

    def per_key(self, way: str) -> float | None:
        got = self.requests.get(way)
        return statistics.median(got) / self.keys[way] if got else None

    def line(self, label: str, way: str, note: str = "") -> None:
        runs = " ".join(f"{s:.2f}" for s in self.seconds[way])
        per_key = self.per_key(way)
        requests = f"{per_key:.4f} req/key" if per_key is not None else ""
        print(f"  {label:38} {self.keys[way]:8d} keys {statistics.median(self.seconds[way]):7.2f} s "
              f"{self.rate(way):9.0f} keys/s {requests:>16}  (runs: {runs} s) {note}", flush=True)


# -- the plan, as the GC job hands it to delete_plan ---------------------------------------------------------


def _write_plan(infos, root: str, path: Path) -> None:
    """gc_actions-shaped rows of every listed object below `root` (the columns delete_plan reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statekeeper.storage.roots import Root

    r = Root(root)
    rows: dict[str, list] = {"uri": [], "size": [], "mtime": [], "etag": [], "delete_order": [], "root_id": [],
                             "bucket": [], "relative_path": []}
    for info in infos:
        rows["uri"].append(info.uri)
        rows["size"].append(info.size)
        rows["mtime"].append(info.mtime)
        rows["etag"].append(info.etag)
        rows["delete_order"].append(1)
        rows["root_id"].append(r.root_id)
        rows["bucket"].append(root.partition("://")[2].partition("/")[0] if not root.startswith("file:") else "")
        rows["relative_path"].append(r.relative(info.uri))
    pq.write_table(pa.table({
        "uri": pa.array(rows["uri"], pa.string()), "size": pa.array(rows["size"], pa.int64()),
        "mtime": pa.array(rows["mtime"], pa.timestamp("us", tz="UTC")), "etag": pa.array(rows["etag"], pa.string()),
        "delete_order": pa.array(rows["delete_order"], pa.int32()), "root_id": pa.array(rows["root_id"], pa.string()),
        "bucket": pa.array(rows["bucket"], pa.string()), "relative_path": pa.array(rows["relative_path"], pa.string()),
    }), path)


def _ours(spark, plan: Path, storage, roots: list[str]) -> tuple[float, dict[str, int], list[str]]:
    """The GC job's deletion stage: the stores' self-tests on the driver (gc.protection), delete_plan (its
    partitioning, DeleteTask, its defaults), outcome counts."""
    from pyspark.sql import functions as F

    from statekeeper.gc import protection as gc_protection
    from statekeeper.gc.execute import delete_plan
    from statekeeper.gc.options import GcOptions
    from statekeeper.storage.enforcement import Enforcement
    from statekeeper.storage.roots import Root

    sc = spark.sparkContext
    accumulators = (sc.accumulator(0), sc.accumulator(0), sc.accumulator(0))
    t = time.perf_counter()
    enforcement = Enforcement(storage)
    spread, _ = gc_protection.decide(storage, enforcement, [(root, Root(root).root_id) for root in roots])
    results = delete_plan(spark.read.parquet(str(plan)), roots, storage, GcOptions().delete, None, accumulators,
                          enforcement=enforcement, spread=spread)
    rows = results.groupBy("outcome").agg(F.count("*").alias("n"), F.first("message").alias("example")).collect()
    seconds = time.perf_counter() - t
    counts = {r["outcome"]: r["n"] for r in rows}
    return seconds, counts, [f"{r['outcome']}: {r['example']}" for r in rows if r["example"]]


# -- S3 ---------------------------------------------------------------------------------------------


def _keys(prefix: str, count: int, dirs: int) -> list[str]:
    return [f"{prefix}/job-{i % dirs:03d}/shared/{uuid.uuid4()}" for i in range(count)]


def _requests_since(log: Path, offset: int) -> int:
    """HTTP requests moto logged after `offset` (its access log: one line per request)."""
    time.sleep(0.2)   # the last lines of the run
    with open(log, "rb") as f:
        f.seek(offset)
        return f.read().count(b" HTTP/1.1")


def run_s3(args, spark, work: Path) -> dict:
    _paths()
    from statekeeper.storage.s3 import S3FileIO, make_s3_client
    from bench._moto import EnforcingMotoServer
    from tests.plugins.s3 import make_bucket

    log = work / "moto.log"
    server = EnforcingMotoServer(log, seed=True)
    tally = _Tally()
    n, n_seq = args.objects, min(args.sequential_objects, args.objects)
    try:
        config = server.config(max_pool_connections=32)
        listing = config.with_overrides(delete_recheck="listing")
        client = make_s3_client(config, max_pool_connections=32)

        def fresh(way: str, count: int) -> tuple[str, list[str]]:
            bucket = make_bucket(config, f"bench-{way}")
            keys = _keys("cp", count, args.dirs)
            t = time.perf_counter()
            server.seed_objects(bucket, [(k, 64) for k in keys])
            print(f"    populated s3://{bucket}/cp with {count} objects in {time.perf_counter() - t:.1f} s (setup)",
                  flush=True)
            return bucket, keys

        # Warm the Spark Python workers and the deleter's imports on a few keys (not counted).
        warm, _ = fresh("warm", 200)
        _write_plan(S3FileIO(config).list(f"s3://{warm}/cp"), f"s3://{warm}/cp", work / "warm.parquet")
        _ours(spark, work / "warm.parquet", config, [f"s3://{warm}/cp"])

        ways = ["seq", "raw", "raw_pinned", "ours"] + (["listing"] if args.with_listing else [])
        for rep in range(args.repeat):
            for way in ways:
                bucket, keys = fresh(way.replace("_", "-"), n_seq if way == "seq" else n)
                root = f"s3://{bucket}/cp"
                if way in ("ours", "listing"):
                    _write_plan(S3FileIO(config).list(root), root, work / "plan-s3.parquet")
                etags = ({info.uri.split("/", 3)[3]: info.etag for info in S3FileIO(config).list(root)}
                         if way == "raw_pinned" else {})
                offset = log.stat().st_size
                if way == "seq":
                    t = time.perf_counter()
                    for k in keys:
                        client.delete_object(Bucket=bucket, Key=k)
                    seconds = time.perf_counter() - t
                elif way in ("raw", "raw_pinned"):
                    batches = [keys[i:i + 1000] for i in range(0, len(keys), 1000)]

                    def delete_batch(batch: list[str], bucket: str = bucket, etags: dict = etags) -> int:
                        objects = [{"Key": k, "ETag": f'"{etags[k]}"'} if etags else {"Key": k} for k in batch]
                        response = client.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
                        return len(response.get("Errors", ()))

                    t = time.perf_counter()
                    with ThreadPoolExecutor(max_workers=args.threads) as pool:
                        errors = sum(pool.map(delete_batch, batches))
                    seconds = time.perf_counter() - t
                    assert errors == 0, f"{way} DeleteObjects reported {errors} per-key errors"
                else:
                    seconds, counts, examples = _ours(spark, work / "plan-s3.parquet",
                                                      config if way == "ours" else listing, [root])
                    assert counts == {"deleted": len(keys)}, (counts, examples)
                tally.add(way, len(keys), seconds, _requests_since(log, offset))
                left = sum(1 for _ in S3FileIO(config).list(root))
                assert left == 0, f"{left} objects left in {root} ({way})"
                print(f"  run {rep + 1}/{args.repeat} {way:8} {seconds:7.2f} s", flush=True)
    finally:
        server.stop()

    print(f"S3 (moto on loopback, conditional deletes enforced), {n} objects in {args.dirs} prefixes, medians of "
          f"{args.repeat}:", flush=True)
    tally.line("(a) sequential delete_object", "seq", f"(measured on {n_seq} keys)")
    tally.line(f"(b) raw DeleteObjects x{args.threads} threads", "raw", "(1000-key batches, no precondition)")
    tally.line("    the same, each key's ETag sent", "raw_pinned", "(the endpoint checks what ours asks it to)")
    tally.line(f"(c) ours: Spark local[{args.cores}] + GC deleter", "ours",
               "(delete_plan; DeleteObjects with each key's planned ETag)")
    if args.with_listing:
        tally.line("    ours, delete_recheck=listing", "listing", "(listing re-check first; informative)")
    r_seq, r_raw = tally.rate("ours") / tally.rate("seq"), tally.rate("ours") / tally.rate("raw")
    r_pinned = tally.rate("ours") / tally.rate("raw_pinned")
    print(f"  ratios (keys/s): ours/sequential {r_seq:.1f}   ours/raw {r_raw:.2f}   ours/raw pinned {r_pinned:.2f}   "
          f"requests per key: ours {tally.per_key('ours'):.4f}, raw {tally.per_key('raw'):.4f}", flush=True)
    out = {"s3_objects": n, "s3_repeat": args.repeat, "s3_sequential_keys": n_seq,
           "s3_sequential_keys_per_s": round(tally.rate("seq"), 1), "s3_raw_keys_per_s": round(tally.rate("raw"), 1),
           "s3_raw_pinned_keys_per_s": round(tally.rate("raw_pinned"), 1),
           "s3_ours_keys_per_s": round(tally.rate("ours"), 1), "ratio_ours_sequential": round(r_seq, 2),
           "ratio_ours_raw": round(r_raw, 3), "ratio_ours_raw_pinned": round(r_pinned, 3),
           "s3_ours_requests_per_key": round(tally.per_key("ours") or 0, 5),
           "s3_raw_requests_per_key": round(tally.per_key("raw") or 0, 5)}
    if args.with_listing:
        out["s3_listing_keys_per_s"] = round(tally.rate("listing"), 1)
    return out


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
    from statekeeper.storage.local import file_uri

    n = args.objects
    tally = _Tally()
    warm_root = work / "local-warm" / "cp"
    _make_tree(warm_root, 100, 2)
    _write_plan(LocalFileIO().list(str(warm_root)), file_uri(str(warm_root)), work / "warm-local.parquet")
    _ours(spark, work / "warm-local.parquet", StorageConfig(), [str(warm_root)])

    for rep in range(args.local_repeat):
        for way in ("find", "ours"):
            root = work / f"local-{way}-{rep}" / "cp"
            t = time.perf_counter()
            _make_tree(root, n, args.dirs)
            if way == "ours":
                _write_plan(LocalFileIO().list(str(root)), file_uri(str(root)), work / "plan-local.parquet")
            subprocess.run(["sync"], check=False)
            print(f"    created {n} files in {time.perf_counter() - t:.0f} s (setup)", flush=True)
            if way == "find":
                t = time.perf_counter()
                subprocess.run(["find", str(root), "-type", "f", "-delete"], check=True)
                seconds = time.perf_counter() - t
            else:
                seconds, counts, examples = _ours(spark, work / "plan-local.parquet", StorageConfig(), [str(root)])
                assert counts == {"deleted": n}, (counts, examples)
            left = sum(len(files) for _, _, files in os.walk(root))
            assert left == 0, f"{left} files left below {root}"
            tally.add(way, n, seconds)
            print(f"  run {rep + 1}/{args.local_repeat} {way:8} {seconds:7.2f} s", flush=True)

    print(f"local disk ({work}), {n} files in {args.dirs} directories, medians of {args.local_repeat}:", flush=True)
    tally.line("find -type f -delete", "find")
    tally.line(f"ours: Spark local[{args.cores}] + GC deleter", "ours", "(lstat against the plan + unlink)")
    ratio = tally.rate("ours") / tally.rate("find")
    print(f"  ratio (keys/s): ours/find {ratio:.2f}", flush=True)
    return {"local_objects": n, "local_repeat": args.local_repeat,
            "local_find_keys_per_s": round(tally.rate("find"), 1),
            "local_ours_keys_per_s": round(tally.rate("ours"), 1), "ratio_ours_find": round(ratio, 3)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench gc_delete", description=DESCRIPTION)
    p.add_argument("--objects", type=int, default=100_000, help="objects per way (S3 raw/ours, local)")
    p.add_argument("--sequential-objects", type=int, default=5_000,
                   help="keys deleted by the sequential delete_object loop (reported as keys/s)")
    p.add_argument("--threads", type=int, default=8, help="threads of the raw DeleteObjects script")
    p.add_argument("--dirs", type=int, default=20, help="directories (prefixes) the objects are spread over")
    p.add_argument("--repeat", type=int, default=3, help="runs per way on S3 (medians are reported)")
    p.add_argument("--local-repeat", type=int, default=3, help="runs per way on local disk")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--skip-local", action="store_true")
    p.add_argument("--with-listing", action="store_true", help="also ours with delete_recheck=listing (S3)")
    args = p.parse_args(argv)
    if min(args.objects, args.repeat, args.local_repeat, args.dirs) < 1:
        p.error("--objects, --repeat, --local-repeat and --dirs must be >= 1")
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
