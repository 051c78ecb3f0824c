"""Benchmark: the DR copy's copy step (CopyTask in Spark tasks) vs `aws s3 sync` and `cp -r`.

A synthetic closure shaped like an incremental RocksDB checkpoint (--objects files, default 10,000, below
<root>/job-NN/shared/ plus 5% exclusive files in <root>/job-NN/chk-1000/; mostly small files, log-uniform
128 B - 64 KiB, plus enough 1-8 MiB files to reach about --total-mb) is copied, in one run:

S3 (a moto server on loopback started by the bench, enforcing S3's preconditions: bench/_moto_server.py, which says
why the bench does not run on SeaweedFS as the tests do; the source and every same-store target are buckets on it;
a second such server is the other endpoint a streamed copy writes to):
* aws s3 sync     - `aws s3 sync s3://SRC/flink s3://DST/flink --endpoint-url ...` with awscli from PyPI
                    (installed once into its own venv under $STATEKEEPER_CACHE/bench/, never into the
                    project's: its botocore pin conflicts with ours), default settings (10 requests in
                    flight), path-style addressing. Between buckets of one endpoint it copies server-side:
                    one CopyObject per object, after listing both sides.
* ours            - exactly the job's copy step (CopyToDr._transfer): the plan (source_uri, target_uri,
                    expected_size, expected_version: the source's size and ETag as the index records them) read
                    by Spark, `in_target_order(rows, 4 x cores).mapInArrow(CopyTask(...))`, outcomes
                    counted, on a local Spark session (local[--cores]) with the job's defaults (16 copies in
                    flight per task, size verification). Source and target are one store and identity, so
                    CopyObject pinned to the indexed ETag (CopySourceIfMatch), create-only (If-None-Match: *);
                    what the target holds comes from one listing page per target directory: one request per
                    object plus the listing pages.
* ours, streamed  - the same into a bucket of the second moto server (another endpoint: to the Transfer another
                    store), so every byte is streamed through the task: a GET pinned to the indexed ETag
                    (If-Match) from the first server, a create-only PUT to the second, as a copy to another region
                    or account is. The baseline stays `aws s3 sync` between buckets of one endpoint.
Local disk: the same tree in a temp dir; ours (same Spark path, file:// URIs: each new file created in place
(O_EXCL) by a kernel copy after the source's indexed fingerprint is checked, one durability barrier (syncfs)
per batch of files before their results go out) vs `cp -r SRC DST`, which never syncs. An extra line shows ours
with the barrier off (TransferSettings.durable=False; not what the job does).

Every way copies into an empty target (a fresh bucket or directory), --repeat times on S3 and
--local-repeat times on disk, the ways interleaved; medians are reported. Populating the source, checking
and emptying each target are setup, not timed. Ratios are ours / baseline in objects/s (every way copies
the same objects and bytes, so the bytes/s ratio is the same). Spark session start and a warm-up job are
not counted; the Spark job of ours (reading the plan, shuffling it, the tasks, collecting outcome counts)
is, and its share is printed as the floor (the same job with a task that copies nothing). The aws figure
is the command's wall time, its process start included (printed). Not included in ours: computing the
closure from the index tables, verification at the target, the rewritten `_metadata` and the Delta
audit rows (synthetic files have no real `_metadata`). HTTP requests per object come from the moto servers'
access logs (LIST pages included; the streamed way counts both servers). Informative: the skip pass (ours again
on the complete target).

    python -m bench dr_copy [--objects 10000] [--total-mb 400] [--jobs 4] [--repeat 3] [--local-repeat 5]
                            [--cores 2] [--copies-in-flight N] [--skip-s3] [--skip-local]
                            [--skip-streamed] [--skip-nofsync]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NAME = "dr_copy"
DESCRIPTION = "DR copy step (CopyTask via Spark mapInArrow) vs aws s3 sync between moto buckets and cp -r"
REPO = Path(__file__).resolve().parents[1]
AWSCLI_VERSION = "1.46.3"    # verified with Python 3.11 against moto 5.2 (its own botocore, in its own venv)
ROOT = "flink"               # the checkpoint root below each bucket / directory

_MIB = 1024 * 1024
_SMALL = (128, 64 * 1024)    # log-uniform sizes of the small files (bytes)
_LARGE = (_MIB, 8 * _MIB - 1)  # uniform sizes of the large files (below awscli's 8 MiB multipart threshold)


def _paths() -> None:
    for p in (str(REPO), str(REPO / "include")):
        if p not in sys.path:
            sys.path.insert(0, p)


# -- the synthetic closure ------------------------------------------------------------------------------


def closure_layout(objects: int, total_mb: float, jobs: int, seed: int = 7) -> list[tuple[str, int]]:
    """(relative path, size) of every file: 95% in job-NN/shared/, 5% in job-NN/chk-1000/; sizes mostly
    small (log-uniform), plus 1-8 MiB files until the total is about `total_mb` (deterministic)."""
    rng = random.Random(seed)
    lo, hi = _SMALL
    small_mean = (hi - lo) / math.log(hi / lo)
    large_mean = sum(_LARGE) / 2
    large = max(0, min(objects, round((total_mb * _MIB - objects * small_mean) / (large_mean - small_mean))))
    sizes = [rng.randint(*_LARGE) for _ in range(large)]
    sizes += [int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for _ in range(objects - large)]
    rng.shuffle(sizes)
    out = []
    for i, size in enumerate(sizes):
        job = f"job-{i % jobs:02d}"
        if i % 20 == 19:
            out.append((f"{job}/chk-1000/{uuid.UUID(int=rng.getrandbits(128))}", size))
        else:
            out.append((f"{job}/shared/{uuid.UUID(int=rng.getrandbits(128))}.sst", size))
    return out


class _Payload:
    """Bytes for the files: slices of one random buffer at a per-file offset (distinct contents)."""

    def __init__(self) -> None:
        self._pool = os.urandom(_LARGE[1] + 1 + _MIB)

    def get(self, index: int, size: int) -> bytes:
        start = (index * 4099) % _MIB
        return self._pool[start:start + size]


def _size(n: float) -> str:
    return f"{n / _MIB:.1f} MiB"


# -- measuring ---------------------------------------------------------------------------------------------


class _Tally:
    """Seconds per way over the repeats; objects and bytes are the same for every way."""

    def __init__(self, objects: int, nbytes: int) -> None:
        self.objects, self.bytes = objects, nbytes
        self.seconds: dict[str, list[float]] = {}

    def add(self, way: str, seconds: float) -> None:
        self.seconds.setdefault(way, []).append(seconds)

    def median(self, way: str) -> float:
        return statistics.median(self.seconds[way])

    def objects_per_s(self, way: str) -> float:
        return self.objects / self.median(way)

    def mb_per_s(self, way: str) -> float:
        return self.bytes / _MIB / self.median(way)

    def line(self, label: str, way: str, note: str = "", *, moved: bool = True) -> None:
        runs = " ".join(f"{s:.1f}" for s in self.seconds[way])
        rate = f"{self.mb_per_s(way):7.1f} MiB/s" if moved else f"{'-':>7} MiB/s"
        print(f"  {label:42} {self.median(way):7.2f} s {self.objects_per_s(way):8.0f} objects/s {rate}"
              f"  (runs: {runs} s) {note}", flush=True)

    def ratio(self, ours: str, baseline: str) -> float:
        return self.median(baseline) / self.median(ours)


def _write_plan(path: Path, layout: list[tuple[str, int]], source_root: str, target_root: str,
                versions: dict[str, str] | None = None, known: dict[str, str] | None = None) -> None:
    """The copy plan as the job hands it to the copy step: one row per distinct target object, with the source's
    size and version as the index records them (`versions`: relative path -> ETag or local fingerprint), and
    `known`: the target versions an earlier run recorded in dr_files (relative path -> version), if any."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {
        "source_uri": pa.array([f"{source_root}/{rel}" for rel, _ in layout], pa.string()),
        "target_uri": pa.array([f"{target_root}/{rel}" for rel, _ in layout], pa.string()),
        "expected_size": pa.array([size for _, size in layout], pa.int64()),
        "expected_version": pa.array([(versions or {}).get(rel) for rel, _ in layout], pa.string()),
    }
    if known is not None:
        columns["known_version"] = pa.array([known.get(rel) for rel, _ in layout], pa.string())
    pq.write_table(pa.table(columns), path)


def _versions(fio, source_root: str) -> dict[str, str]:
    """What the index would record as each source object's version (setup: one listing)."""
    return {info.uri[len(source_root) + 1:]: info.etag for info in fio.list(source_root)}


def _copy_step(spark, plan: Path, task) -> tuple[float, dict[str, tuple[int, int]], list[str]]:
    """The job's copy step (CopyToDr._transfer): rows in target order, mapInArrow(task), counts."""
    from pyspark.sql import functions as F

    from statekeeper.replicate.tasks import COPY_OUT_SPARK, in_target_order

    parts = max(1, spark.sparkContext.defaultParallelism) * 4
    t = time.perf_counter()
    objects = spark.read.parquet(str(plan))
    copied = in_target_order(objects, parts).mapInArrow(task, COPY_OUT_SPARK)
    rows = copied.groupBy("outcome").agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b"),
                                         F.first("message", ignorenulls=True).alias("example")).collect()
    seconds = time.perf_counter() - t
    counts = {r["outcome"]: (int(r["n"]), int(r["b"] or 0)) for r in rows}
    return seconds, counts, [f"{r['outcome']}: {r['example']}" for r in rows if r["example"]]


def _copy_task(spark, source, target, source_root: str, target_root: str, in_flight: int | None = None):
    """CopyTask as CopyToDr builds it, with the job's default options (DrOptions())."""
    from statekeeper.replicate.options import DrOptions, VerifyMode
    from statekeeper.replicate.tasks import CopyTask

    opts = DrOptions()
    sc = spark.sparkContext
    return CopyTask(source, target, [source_root], [target_root], in_flight or opts.copies_in_flight,
                    opts.verify is VerifyMode.CHECKSUM, None, files=sc.accumulator(0), bytes=sc.accumulator(0))


def _noop_task(batches):
    """A copy task that copies nothing (every row 'skipped'): the Spark job's own cost."""
    import pyarrow as pa

    from statekeeper.replicate.tasks import COPY_OUT

    for batch in batches:
        rows = batch.to_pylist()
        yield pa.RecordBatch.from_pylist(
            [{"source_uri": r["source_uri"], "target_uri": r["target_uri"], "outcome": "skipped",
              "size": r["expected_size"], "checksum": None, "method": "", "message": None, "retries": 0}
             for r in rows], schema=COPY_OUT)


def run_floor(args, spark, work: Path, layout: list[tuple[str, int]]) -> dict:
    """The copy step's Spark job with a task that does no I/O: read the plan, repartition, tasks, counts."""
    _write_plan(work / "floor.parquet", layout, "s3://floor-src/flink", "s3://floor-dst/flink")
    seconds = []
    for _ in range(args.repeat + 1):   # the first one warms up
        s, counts, examples = _copy_step(spark, work / "floor.parquet", _noop_task)
        _expect(counts, examples, "skipped", len(layout), sum(size for _, size in layout))
        seconds.append(s)
    floor = statistics.median(seconds[1:])
    print(f"floor: the same Spark job with a task that copies nothing, {len(layout)} rows: {floor:.2f} s "
          f"(runs: {' '.join(f'{x:.1f}' for x in seconds[1:])} s; included in every 'ours' figure)", flush=True)
    return {"spark_floor_s": round(floor, 3)}


def _nofsync_task(source, source_root: str, target_root: str, in_flight: int):
    """CopyTask's loop with TransferSettings(durable=False): a closure, so cloudpickle ships it by value."""
    def run(batches):
        import pyarrow as pa

        from statekeeper.replicate.tasks import COPY_OUT
        from statekeeper.storage.transfer import Transfer, TransferItem, TransferSettings

        def items():
            for batch in batches:
                for row in batch.to_pylist():
                    yield TransferItem(row["source_uri"], row["target_uri"], row["expected_size"],
                                       source_version=row["expected_version"])

        transfer = Transfer(source, None, [target_root], TransferSettings(in_flight=in_flight, durable=False),
                            source_roots=[source_root])
        out = []
        for r in transfer.run(items()):
            out.append({"source_uri": r.source, "target_uri": r.target, "outcome": r.outcome.value, "size": r.size,
                        "checksum": r.checksum, "method": r.method, "message": r.message, "retries": r.retries})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=COPY_OUT)
    return run


def _expect(counts: dict[str, tuple[int, int]], examples: list[str], outcome: str, objects: int, nbytes: int) -> None:
    if counts != {outcome: (objects, nbytes)}:
        raise RuntimeError(f"expected {objects} objects ({nbytes} bytes) {outcome}, got {counts}; {examples[:3]}")


# -- awscli, in its own venv -----------------------------------------------------------------------------


def awscli() -> Path:
    """The `aws` executable of awscli==AWSCLI_VERSION, installed once into a venv of its own."""
    from bench import cache_dir

    venv = cache_dir(f"awscli-{AWSCLI_VERSION}")
    aws, stamp = venv / "bin" / "aws", venv / ".installed"
    if stamp.exists() and aws.exists():
        return aws
    print(f"installing awscli=={AWSCLI_VERSION} into {venv} (once)", flush=True)
    for argv in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  f"awscli=={AWSCLI_VERSION}"]):
        out = subprocess.run(argv, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-2000:]}")
    version = subprocess.run([str(aws), "--version"], capture_output=True, text=True, check=True)
    stamp.write_text(version.stdout + version.stderr)
    return aws


def _aws_env(work: Path, access_key: str, secret_key: str) -> dict[str, str]:
    """Credentials of the moto server, path-style addressing, and nothing from the user's ~/.aws."""
    config = work / "aws-config"
    config.write_text("[default]\ns3 =\n    addressing_style = path\n")
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "AWS_CONFIG_FILE": str(config),
            "AWS_SHARED_CREDENTIALS_FILE": str(work / "aws-credentials-none"), "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key, "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1"}


# -- S3 --------------------------------------------------------------------------------------------------


def _bucket_contents(client, bucket: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        out.update({o["Key"]: o["Size"] for o in page.get("Contents", ())})
    return out


def _check_bucket(client, bucket: str, expected: dict[str, int], way: str) -> None:
    found = _bucket_contents(client, bucket)
    if found != expected:
        missing = sorted(set(expected) - set(found))
        wrong = sorted(k for k in expected if k in found and found[k] != expected[k])
        raise RuntimeError(f"{way}: s3://{bucket} does not hold the closure: {len(found)} objects, "
                           f"{len(missing)} missing (e.g. {missing[:2]}), {len(wrong)} of another size")


def _requests_both(log: Path, other: Path | None, offset: tuple[int, int]) -> int:
    return _requests_since(log, offset[0]) + (_requests_since(other, offset[1]) if other is not None else 0)


def _requests_since(log: Path, offset: int) -> int:
    """HTTP requests moto logged after `offset` (its access log: one line per request)."""
    time.sleep(0.2)   # the last lines of the run
    with open(log, "rb") as f:
        f.seek(offset)
        return f.read().count(b" HTTP/1.1")


def _drop_bucket(client, bucket: str) -> None:
    keys = list(_bucket_contents(client, bucket))
    batches = [keys[i:i + 1000] for i in range(0, len(keys), 1000)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda b: client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in b], "Quiet": True}), batches))
    client.delete_bucket(Bucket=bucket)


def run_s3(args, spark, work: Path, layout: list[tuple[str, int]], payload: _Payload) -> dict:
    _paths()
    from statekeeper.storage.s3 import make_s3_client
    from bench._moto import EnforcingMotoServer
    from tests.plugins.s3 import MOTO_ACCESS_KEY, MOTO_SECRET_KEY

    aws = awscli()
    env = _aws_env(work, MOTO_ACCESS_KEY, MOTO_SECRET_KEY)
    t = time.perf_counter()
    version = subprocess.run([str(aws), "--version"], capture_output=True, text=True, env=env, check=True)
    aws_start = time.perf_counter() - t
    print(f"{(version.stdout or version.stderr).strip()}; `aws --version` takes {aws_start:.2f} s (process start, "
          "included in the aws figures)", flush=True)
    nbytes = sum(size for _, size in layout)
    tally = _Tally(len(layout), nbytes)
    log, other_log = work / "moto.log", work / "moto-dr.log"
    requests: dict[str, int] = {}
    server = EnforcingMotoServer(log, seed=True)
    other = None if args.skip_streamed else EnforcingMotoServer(other_log)
    try:
        config = server.config()
        streamed_target = other.config() if other is not None else None
        client = make_s3_client(config, max_pool_connections=32)
        other_client = make_s3_client(streamed_target, max_pool_connections=32) if streamed_target else None
        source = f"bench-src-{uuid.uuid4().hex[:8]}"
        client.create_bucket(Bucket=source)
        t = time.perf_counter()
        server.seed_objects(source, [(f"{ROOT}/{rel}", size) for rel, size in layout])
        print(f"populated s3://{source}/{ROOT} with {len(layout)} objects, {_size(nbytes)} in "
              f"{time.perf_counter() - t:.0f} s (inside the server; setup, not timed)", flush=True)
        expected = {f"{ROOT}/{rel}": size for rel, size in layout}
        source_root = f"s3://{source}/{ROOT}"
        from statekeeper.storage import RoutingFileIO

        versions = _versions(RoutingFileIO(config), source_root)

        def fresh(way: str) -> tuple[str, str]:
            bucket = f"bench-{way}-{uuid.uuid4().hex[:8]}"
            (other_client if way == "streamed" else client).create_bucket(Bucket=bucket)
            return bucket, f"s3://{bucket}/{ROOT}"

        def logged() -> tuple[int, int]:
            return log.stat().st_size, other_log.stat().st_size if other is not None else 0

        # Warm-up (not counted): Spark's Python workers, imports, clients; the first 200 objects.
        bucket, target_root = fresh("warm")
        _write_plan(work / "warm.parquet", layout[:200], source_root, target_root, versions)
        _copy_step(spark, work / "warm.parquet", _copy_task(spark, config, None, source_root, target_root))
        _drop_bucket(client, bucket)

        ways = ["aws", "ours"] + ([] if args.skip_streamed else ["streamed"])
        for rep in range(args.repeat):
            for way in ways:
                bucket, target_root = fresh(way)
                offset = logged()
                if way == "aws":
                    t = time.perf_counter()
                    out = subprocess.run([str(aws), "s3", "sync", source_root, target_root, "--endpoint-url",
                                          config.endpoint, "--only-show-errors"],
                                         env=env, capture_output=True, text=True)
                    seconds = time.perf_counter() - t
                    if out.returncode != 0:
                        raise RuntimeError(f"aws s3 sync failed ({out.returncode}): {out.stderr[-2000:]}")
                else:
                    _write_plan(work / "plan.parquet", layout, source_root, target_root, versions)
                    task = _copy_task(spark, config, None if way == "ours" else streamed_target, source_root,
                                      target_root, args.copies_in_flight)
                    seconds, counts, examples = _copy_step(spark, work / "plan.parquet", task)
                    _expect(counts, examples, "copied", len(layout), nbytes)
                requests[way] = _requests_both(log, other_log if other is not None else None, offset)
                if way == "ours" and rep == args.repeat - 1:
                    offset = logged()
                    skip_s, counts, examples = _copy_step(spark, work / "plan.parquet", task)
                    _expect(counts, examples, "skipped", len(layout), nbytes)
                    tally.add("skip", skip_s)
                    requests["skip"] = _requests_both(log, None, offset)
                tally.add(way, seconds)
                print(f"  run {rep + 1}/{args.repeat} {way:9} {seconds:7.2f} s", flush=True)
                target_client = other_client if way == "streamed" else client
                _check_bucket(target_client, bucket, expected, way)
                _drop_bucket(target_client, bucket)
    finally:
        server.stop()
        if other is not None:
            other.stop()

    print(f"S3 (moto on loopback), {len(layout)} objects, {_size(nbytes)}, medians of {args.repeat}:", flush=True)
    tally.line("aws s3 sync (server-side copies)", "aws")
    tally.line(f"ours: Spark local[{args.cores}] + CopyTask, same store", "ours", "(server-side CopyObject)")
    if not args.skip_streamed:
        tally.line("ours, streamed to a second endpoint", "streamed", "(GET + PUT through the tasks)")
    tally.line("ours again, target complete (skip pass)", "skip", "(all skipped; informative)", moved=False)
    print("  requests per object (moto's log): " + "   ".join(
        f"{way} {requests[way] / len(layout):.2f}" for way in [*ways, "skip"]), flush=True)
    r = tally.ratio("ours", "aws")
    text = f"  ratios (objects/s and bytes/s): ours/aws-sync {r:.2f}"
    summary = {"s3_objects": len(layout), "s3_bytes": nbytes, "s3_repeat": args.repeat,
               "s3_requests_per_object": {way: round(n / len(layout), 4) for way, n in requests.items()},
               "s3_aws_objects_per_s": round(tally.objects_per_s("aws"), 1),
               "s3_aws_mib_per_s": round(tally.mb_per_s("aws"), 2),
               "s3_ours_objects_per_s": round(tally.objects_per_s("ours"), 1),
               "s3_ours_mib_per_s": round(tally.mb_per_s("ours"), 2),
               "s3_skip_objects_per_s": round(tally.objects_per_s("skip"), 1),
               "ratio_ours_aws_sync": round(r, 3)}
    if not args.skip_streamed:
        rs = tally.ratio("streamed", "aws")
        text += f"   ours-streamed/aws-sync {rs:.2f}"
        summary.update({"s3_streamed_objects_per_s": round(tally.objects_per_s("streamed"), 1),
                        "s3_streamed_mib_per_s": round(tally.mb_per_s("streamed"), 2),
                        "ratio_streamed_aws_sync": round(rs, 3)})
    print(text, flush=True)
    return summary


# -- local disk ------------------------------------------------------------------------------------------


def _make_tree(base: Path, layout: list[tuple[str, int]], payload: _Payload) -> None:
    for d in sorted({rel.rsplit("/", 1)[0] for rel, _ in layout}):
        (base / d).mkdir(parents=True, exist_ok=True)
    for i, (rel, size) in enumerate(layout):
        with open(base / rel, "wb") as f:
            f.write(payload.get(i, size))


def _check_tree(base: Path, layout: list[tuple[str, int]], way: str) -> None:
    found = {}
    for dirpath, _, files in os.walk(base):
        for name in files:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, base)] = os.path.getsize(path)
    if found != dict(layout):
        raise RuntimeError(f"{way}: {base} does not hold the closure ({len(found)} files, "
                           f"{len(set(dict(layout)) - set(found))} missing)")


def run_local(args, spark, work: Path, layout: list[tuple[str, int]], payload: _Payload) -> dict:
    _paths()
    from statekeeper.replicate.options import DrOptions
    from statekeeper.storage import StorageConfig
    from statekeeper.storage.local import file_uri

    nbytes = sum(size for _, size in layout)
    tally = _Tally(len(layout), nbytes)
    src = work / "local-src" / ROOT
    t = time.perf_counter()
    _make_tree(src, layout, payload)
    subprocess.run(["sync"], check=False)
    print(f"created {len(layout)} files, {_size(nbytes)} in {time.perf_counter() - t:.0f} s (setup, not timed)",
          flush=True)
    source_root = file_uri(str(src))
    config = StorageConfig()
    in_flight = args.copies_in_flight or DrOptions().copies_in_flight
    from statekeeper.storage import RoutingFileIO

    versions = _versions(RoutingFileIO(), source_root)

    def fresh(way: str) -> Path:
        return work / f"local-{way}-{uuid.uuid4().hex[:8]}" / ROOT

    def drop(dst: Path) -> None:
        shutil.rmtree(dst.parent)
        subprocess.run(["sync"], check=False)

    # Warm-up (not counted).
    dst = fresh("warm")
    _write_plan(work / "warm-local.parquet", layout[:200], source_root, file_uri(str(dst)), versions)
    _copy_step(spark, work / "warm-local.parquet", _copy_task(spark, config, None, source_root, file_uri(str(dst))))
    drop(dst)

    ways = ["cp", "ours"] + ([] if args.skip_nofsync else ["nofsync"])
    for rep in range(args.local_repeat):
        for way in ways:
            dst = fresh(way)
            if way == "cp":
                dst.parent.mkdir(parents=True)
                t = time.perf_counter()
                subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
                seconds = time.perf_counter() - t
            else:
                target_root = file_uri(str(dst))
                _write_plan(work / "plan-local.parquet", layout, source_root, target_root, versions)
                task = (_copy_task(spark, config, None, source_root, target_root, args.copies_in_flight)
                        if way == "ours" else
                        _nofsync_task(config, source_root, target_root, in_flight))
                seconds, counts, examples = _copy_step(spark, work / "plan-local.parquet", task)
                _expect(counts, examples, "copied", len(layout), nbytes)
                if way == "ours" and rep == args.local_repeat - 1:
                    # A local target's size proves nothing (#28): what the first pass wrote is skipped on the
                    # version the job would have recorded for it in dr_files (the local fingerprint).
                    known = _versions(RoutingFileIO(), target_root)
                    _write_plan(work / "plan-local.parquet", layout, source_root, target_root, versions, known)
                    skip_s, counts, examples = _copy_step(spark, work / "plan-local.parquet", task)
                    _expect(counts, examples, "skipped", len(layout), nbytes)
                    tally.add("skip", skip_s)
            tally.add(way, seconds)
            print(f"  run {rep + 1}/{args.local_repeat} {way:9} {seconds:7.2f} s", flush=True)
            _check_tree(dst, layout, way)
            drop(dst)

    print(f"local disk ({work}), {len(layout)} files, {_size(nbytes)}, medians of {args.local_repeat}:", flush=True)
    tally.line("cp -r (no fsync)", "cp")
    tally.line(f"ours: Spark local[{args.cores}] + CopyTask", "ours", "(kernel copy, one syncfs per batch)")
    if not args.skip_nofsync:
        tally.line("ours without the barrier (not the job's)", "nofsync", "(durable=False; informative)")
    tally.line("ours again, target complete (skip pass)", "skip", "(all skipped; informative)", moved=False)
    r = tally.ratio("ours", "cp")
    best = min(tally.seconds["cp"]) / tally.median("ours")
    text = (f"  ratio (objects/s and bytes/s): ours/cp-r {r:.2f} (durability included in ours: a syncfs per batch; "
            f"against cp's fastest run {best:.2f})")
    summary = {"local_objects": len(layout), "local_bytes": nbytes,
               "local_cp_objects_per_s": round(tally.objects_per_s("cp"), 1),
               "local_cp_mib_per_s": round(tally.mb_per_s("cp"), 2),
               "local_ours_objects_per_s": round(tally.objects_per_s("ours"), 1),
               "local_ours_mib_per_s": round(tally.mb_per_s("ours"), 2),
               "local_skip_objects_per_s": round(tally.objects_per_s("skip"), 1),
               "ratio_ours_cp": round(r, 3), "ratio_ours_cp_fastest": round(best, 3)}
    if not args.skip_nofsync:
        rn = tally.ratio("nofsync", "cp")
        text += f"; without fsync {rn:.2f}"
        summary.update({"local_nofsync_objects_per_s": round(tally.objects_per_s("nofsync"), 1),
                        "ratio_nofsync_cp": round(rn, 3)})
    print(text, flush=True)
    return summary


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench dr_copy", description=DESCRIPTION)
    p.add_argument("--objects", type=int, default=10_000, help="objects in the closure")
    p.add_argument("--total-mb", type=float, default=400, help="approximate total size of the closure (MiB)")
    p.add_argument("--jobs", type=int, default=4, help="job directories the closure spans")
    p.add_argument("--repeat", type=int, default=3, help="runs per way on S3 (the median is reported)")
    p.add_argument("--local-repeat", type=int, default=5,
                   help="runs per way on local disk (cheap, and cp's times on a shared VM are bimodal)")
    p.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    p.add_argument("--copies-in-flight", type=int, default=None,
                   help="copies in flight per Spark task (default: the job's, DrOptions().copies_in_flight)")
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--skip-local", action="store_true")
    p.add_argument("--skip-streamed", action="store_true", help="leave out ours with the target as another store")
    p.add_argument("--skip-nofsync", action="store_true", help="leave out ours with fsync off (local)")
    args = p.parse_args(argv)
    if min(args.objects, args.repeat, args.local_repeat, args.jobs, args.copies_in_flight or 1) < 1:
        p.error("--objects, --repeat, --local-repeat, --jobs and --copies-in-flight must be >= 1")
    _paths()
    layout = closure_layout(args.objects, args.total_mb, args.jobs)
    large = sum(1 for _, s in layout if s >= _LARGE[0])
    print(f"closure: {len(layout)} objects ({large} of 1-8 MiB), {_size(sum(s for _, s in layout))}, "
          f"{args.jobs} job directories", flush=True)
    payload = _Payload()
    summary: dict = {"bench": NAME}
    with tempfile.TemporaryDirectory(prefix="statekeeper-bench-dr-copy-") as tmp:
        work = Path(tmp)
        from tests.plugins.spark import build_local_session

        t = time.perf_counter()
        spark = build_local_session(work, app_name="statekeeper-bench-dr-copy", cores=args.cores)
        print(f"Spark session started in {time.perf_counter() - t:.1f} s (not counted)", flush=True)
        try:
            summary.update(run_floor(args, spark, work, layout))
            if not args.skip_s3:
                summary.update(run_s3(args, spark, work, layout, payload))
            if not args.skip_local:
                summary.update(run_local(args, spark, work, layout, payload))
        finally:
            spark.stop()
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
