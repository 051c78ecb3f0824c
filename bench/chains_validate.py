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
Ratios are job / baseline (lower is better). Each figure is the median of --repeat runs, with the Spark
jobs and stages the run asked for (from the session's event log, told apart by time).

With --against CHECKOUT the same runs are made with that checkout's library (the before, e.g. a worktree of
the previous commit) in a session of its own, the two checkouts alternating round by round, and the
after/before ratio of each figure is printed. Each checkout runs in a worker process of its own (this
module with --worker), its library first on the path: the two never share a module cache or a JVM.

The synthetic index records the objects it "listed" (its files), so each job fits the driver's code
generation to a store of that size as it would after a real index run (statekeeper.launch.codegen).

    python -m bench chains_validate [--jobs 200] [--checkpoints 10] [--refs 200] [--repeat 3]
                                    [--with-gx] [--cores 2] [--checkout DIR] [--against DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench import cache_dir
from bench._eventlog import spark_conf, work_between

NAME = "chains_validate"
DESCRIPTION = "chains and validation jobs vs a bare references-join-listing Spark job (synthetic index)"
REPO = Path(__file__).resolve().parents[1]
# 3: audited as an index run's cut, reference_count = the snapshot's reference rows;
# 4: the audit row counts the objects listed (the files), which decides the driver's code generation
BUILD_VERSION = 4
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
    from statekeeper.tables.delta_spark import DeltaSparkEngine

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
    engine = DeltaSparkEngine()
    versions = {}
    for spec, rows in ((SNAPSHOTS, snaps), (REFERENCES, references), (FILES, files)):
        table = pa.Table.from_pylist(rows, schema=spec.schema)
        versions[spec.name] = engine.write(spark.createDataFrame(table).repartition(8), warehouse, spec,
                                           mode="overwrite").version
    # The index run's commit point: the audit row naming these versions (statekeeper.tables.cut).
    now = datetime.now(timezone.utc)
    run = IndexResult(run_id="bench", status=IndexRunStatus.SUCCEEDED, started_at=now, finished_at=now,
                      warehouse=warehouse.uri, table_versions=versions, roots=(root,), engine=engine.name,
                      stats=UnitStats(units=jobs, objects_listed=len(files), metadata_found=len(snaps),
                                      metadata_parsed=len(snaps)))
    engine.append_rows(spark, warehouse, INDEX_RUNS, run.audit_row(INDEX_RUNS, {
        "statekeeper_version": "bench", "airflow_run_id": None, "data_interval_start": None,
        "data_interval_end": None, "options": None}))
    return {"snapshots": len(snaps), "references": len(references), "files": len(files), "jobs": jobs,
            "sample_job": f"{root}/{ids[0]}"}


SPARK_ITEMS = ("baseline", "chains", "validate", "validate+gx")
NO_SPARK_ITEMS = ("explain", "explain_baseline")
PROTOCOL = "BENCH "   # the prefix of a worker's answers on its stdout; anything else there is not one


@dataclass
class Figures:
    seconds: list[float] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)   # epoch ms, the driver's clock
    work: list[tuple[int, int]] = field(default_factory=list)          # (Spark jobs, stages) per run

    def median(self) -> float:
        return statistics.median(self.seconds)

    def spark(self) -> tuple[int, int]:
        """The Spark jobs and stages of the median run (runs of one item differ little, if at all)."""
        if not self.work:
            return 0, 0
        order = sorted(range(len(self.seconds)), key=self.seconds.__getitem__)
        return self.work[order[len(order) // 2]]


class Worker:
    """One checkout's session in a process of its own, running the measured items one at a time on request."""

    def __init__(self, label: str, checkout: Path, args: argparse.Namespace, work: Path, *, build: bool) -> None:
        self.label, self.checkout = label, checkout
        self.events = work / f"events-{label}"
        self.events.mkdir(parents=True)
        self.log = work / f"worker-{label}.log"
        conf = " ".join(f"--conf {k}={v}" for k, v in spark_conf(self.events).items())
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "include"), str(REPO)]),
               "PYSPARK_SUBMIT_ARGS": f"{conf} pyspark-shell"}
        argv = [sys.executable, "-m", "bench.chains_validate", "--worker", "--label", label,
                "--jobs", str(args.jobs), "--checkpoints", str(args.checkpoints), "--refs", str(args.refs),
                "--cores", str(args.cores), "--work", str(work / f"session-{label}")]
        if build:
            argv.append("--build")
        self._stderr = open(self.log, "w")
        self.process = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr, text=True, bufsize=1)

    def answer(self) -> dict:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(PROTOCOL):
                return json.loads(line[len(PROTOCOL):])
        raise RuntimeError(f"the {self.label} worker ({self.checkout}) exited {self.process.wait()}; its log "
                           f"{self.log}:\n{self.log.read_text()[-4000:]}")

    def ask(self, item: str) -> dict:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"run": item}) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def stop(self) -> None:
        """Stop the session, which closes its event log."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"run": "quit"}) + "\n")
            self.process.stdin.close()
            if self.process.wait(timeout=300) != 0:
                raise RuntimeError(f"the {self.label} worker exited {self.process.returncode}; its log {self.log}:\n"
                                   f"{self.log.read_text()[-4000:]}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def _say(message: dict) -> None:
    print(PROTOCOL + json.dumps(message), flush=True)


def _worker(args: argparse.Namespace) -> int:
    """The measured side: a warm local session of the library first on sys.path (the checkout's)."""
    from deltalake import DeltaTable

    from statekeeper.chains.explain import explain
    from statekeeper.chains.job import ComputeChains
    from statekeeper.storage import StorageConfig
    from statekeeper.tables import Warehouse
    from statekeeper.tables.delta_spark import DeltaSparkEngine
    from statekeeper.validate.job import ValidateCheckpoints
    from statekeeper.validate.options import ValidateOptions
    from tests.plugins.spark import build_local_session

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    spark = build_local_session(work, app_name=f"statekeeper-bench-{args.label}", cores=args.cores)
    try:
        home = cache_dir(NAME, f"v{BUILD_VERSION}-j{args.jobs}-c{args.checkpoints}-r{args.refs}")
        marker = home / "built.json"
        if not marker.exists():
            if not args.build:
                raise RuntimeError(f"no synthetic index at {home}: the measured checkout's worker builds it")
            shutil.rmtree(home / "warehouse", ignore_errors=True)
            marker.write_text(json.dumps(_build(home / "warehouse", args.jobs, args.checkpoints, args.refs, spark)))
        counts = json.loads(marker.read_text())
        warehouse = Warehouse(str(home / "warehouse"))
        engine = DeltaSparkEngine()
        storage = StorageConfig()

        def baseline() -> None:
            from pyspark.sql import functions as F

            refs = engine.read(spark, warehouse, "references")
            files = engine.read(spark, warehouse, "files").select(F.col("uri").alias("file_uri"), "size")
            (refs.join(files, "file_uri", "left").groupBy("snapshot_uri")
             .agg(F.count("size").alias("present"), F.count(F.lit(1)).alias("n"))
             .write.format("noop").mode("overwrite").save())

        def validate(gx: bool) -> None:
            (ValidateCheckpoints(spark).warehouse(warehouse).storage(storage)
             .configure(ValidateOptions(quality_suite=gx)).execute())

        items = {
            "baseline": baseline,
            "chains": lambda: ComputeChains(spark).warehouse(warehouse).storage(storage).execute(),
            "validate": lambda: validate(False),
            "validate+gx": lambda: validate(True),
            "explain": lambda: explain(counts["sample_job"], warehouse),
            "explain_baseline": lambda: DeltaTable(warehouse.delta_location("references")).to_pyarrow_table(),
        }
        # warm up: Python workers, JIT, table caches; chains also sets the driver's code generation
        baseline()
        items["chains"]()
        _say({"ready": True, "input": counts,
              "factory_mode": spark.conf.get("spark.sql.codegen.factoryMode", None) or "FALLBACK"})
        for line in sys.stdin:
            item = json.loads(line)["run"]
            if item == "quit":
                break
            started, clock = time.time() * 1000, time.perf_counter()
            items[item]()
            _say({"seconds": time.perf_counter() - clock, "start": started, "end": time.time() * 1000})
        return 0
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _row(fig: Figures, base: float) -> str:
    jobs, stages = fig.spark()
    return f"{fig.median():8.2f} s {jobs:5d} {stages:6d} {fig.median() / base:7.2f}x"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench chains_validate", description=DESCRIPTION)
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--checkpoints", type=int, default=10)
    p.add_argument("--refs", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3, help="rounds (medians are reported)")
    p.add_argument("--with-gx", action="store_true")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--checkout", type=Path, default=REPO, help="measure this checkout's library")
    p.add_argument("--against", type=Path, default=None,
                   help="also measure this checkout's library (the before), alternating round by round")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--label", default="after", help=argparse.SUPPRESS)
    p.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args)

    sides = {"after": args.checkout.resolve()}
    if args.against is not None:
        sides["before"] = args.against.resolve()
    items = [i for i in SPARK_ITEMS if i != "validate+gx" or args.with_gx] + list(NO_SPARK_ITEMS)
    figures = {(side, item): Figures() for side in sides for item in items}
    work = Path(tempfile.mkdtemp(prefix="statekeeper-bench-cv-"))
    workers: dict[str, Worker] = {}
    try:
        ready: dict[str, dict] = {}
        # One at a time: the first builds the tables when the cache has none, and warming up is not measured.
        for side, checkout in sides.items():
            workers[side] = Worker(side, checkout, args, work, build=side == "after")
            ready[side] = workers[side].answer()
        for round_ in range(args.repeat):
            for side in (list(sides) if round_ % 2 == 0 else list(sides)[::-1]):
                for item in items:
                    done = workers[side].ask(item)
                    figures[(side, item)].seconds.append(done["seconds"])
                    figures[(side, item)].windows.append((done["start"], done["end"]))
            print(f"  round {round_ + 1}/{args.repeat} done", flush=True)
        for side, worker in workers.items():
            worker.stop()
            for item in SPARK_ITEMS:
                if (side, item) in figures:
                    figures[(side, item)].work = work_between(worker.events, figures[(side, item)].windows)
        counts = ready["after"]["input"]
        print(f"\n{counts['snapshots']} snapshots, {counts['references']} references, {counts['files']} files; "
              f"local[{args.cores}]; medians of {args.repeat} round(s)"
              + (", the two checkouts alternating" if len(sides) > 1 else ""))
        for side, checkout in sides.items():
            print(f"{side}: {checkout}; the driver's code generation after a job: {ready[side]['factory_mode']}")
        header = f"{'':18} {'after':>10} {'jobs':>5} {'stages':>6} {'/base':>8}"
        if "before" in sides:
            header += f"   {'before':>10} {'jobs':>5} {'stages':>6} {'/base':>8}   {'after/before':>12}"
        print(header)
        for item in items:
            line = f"{item:18} "
            base = {side: figures[(side, "explain_baseline" if item in NO_SPARK_ITEMS else "baseline")].median()
                    for side in sides}
            line += _row(figures[("after", item)], base["after"])
            if "before" in sides:
                line += "   " + _row(figures[("before", item)], base["before"])
                line += f"   {figures[('after', item)].median() / figures[('before', item)].median():12.2f}"
            print(line)
        print("/base: to the bare baseline of the same checkout (explain: to deltalake reading all of `references`)")
        report = {"input": counts, "repeat": args.repeat,
                  "seconds": {side: {item: round(figures[(side, item)].median(), 2) for item in items}
                              for side in sides},
                  "spark_jobs_stages": {side: {item: figures[(side, item)].spark() for item in SPARK_ITEMS
                                               if (side, item) in figures} for side in sides}}
        print(json.dumps(report))
        return 0
    finally:
        for worker in workers.values():
            worker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":   # a worker (--worker) is started as this module
    sys.exit(main(sys.argv[1:]))
