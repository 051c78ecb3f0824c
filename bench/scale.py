"""Benchmark: how index, chains, validation and the GC plan scale with the size of the store.

Input: synthetic stores of N objects and N/100 `_metadata` (--metadata-per-100k) made of real
harness `_metadata` rewritten by our codec into many job directories, restore chains across jobs
included (bench/_scale_store.py; cached under $STATEKEEPER_CACHE/bench/scale, never in the
repository; 1M objects take about a minute to generate, hard links, no space).

Each step runs as the DAG runs it: its own `spark-submit spark_jobs/<job>.py` on local[--cores]
with the operator's environment, one fresh warehouse per size, steps in DAG order (index, chains,
validate, GC plan). Measured per step and size:
* wall time of the spark-submit process;
* peak RSS of the JVM (driver and, in local mode, the executor), of the Python driver (the
  application script) and of the Python workers together (summed PSS), sampled from /proc
  every 0.2 s (bench/_procmon.py); and the peak JVM heap from Spark's executor metrics;
* from Spark's event log: the most records any one task handled (and in which phase), which
  shows whether a step holds the whole listing in one task, and the bytes of task results sent
  to the driver, which show what is collected there (bench/_eventlog.py).
Baselines measured in the same run: an empty PySpark spark-submit (session start, one tiny
Python job, stop: the floor of every step) and, for the index, the plain single-process list +
stat + read of every `_metadata` that bench/index_store.py uses. Growth factors are printed
between consecutive sizes; the goal is linear cost (300k -> 1M: <= 3.3x for an N ratio of 3.33)
and driver memory that does not grow with N.

--s3-objects N uploads the N-object store to a moto server on loopback (every `_metadata`
rewritten again for its s3:// location) and runs index, chains and validation against it. Moto
accepts only a few hundred puts per second on this machine: 100k objects take several minutes.

Timings are noisy on a shared machine: read ratios and growth factors, not absolute seconds.

    python -m bench scale --sizes 100k,300k,1m [--metadata-per-100k 1000] [--s3-objects N | --skip-s3]
                          [--steps index,chains,validate,gc] [--cores 2] [--keep-work]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench import _eventlog
from bench._submit import dag_conf, dag_env
from bench._procmon import TreeRun, run_tree
from bench._scale_store import cached_store

NAME = "scale"
DESCRIPTION = "index/chains/validate/GC plan/report as spark-submit at 100k..1M objects: time, memory, task skew growth"
REPO = Path(__file__).resolve().parents[1]
STEPS = {   # step -> (spark_jobs entry point, arguments besides --warehouse)
    "index": ("index_checkpoints", lambda roots: ["--roots", ",".join(roots)]),
    "chains": ("compute_chains", lambda roots: []),
    "validate": ("validate_checkpoints", lambda roots: ["--roots", ",".join(roots)]),
    # Plan only (the job's default mode). The fixtures' files are hours old, the grace period of
    # one hour lets the plan consider them (the default 3 days would plan nothing).
    "gc": ("collect_garbage", lambda roots: ["--older-than", "1h"]),
    # The DAG's last task: the page's aggregates over every table (only top N reach the driver).
    "report": ("build_report", lambda roots: []),
}
S3_STEPS = ("index", "chains", "validate")
# Exit codes that still mean "the step did its work": 1 = something needs attention (e.g. a
# fixture's deliberately broken checkpoint is not restorable).
DONE = (0, 1)
_EMPTY_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(0, 1000, 1, 4).mapInArrow(lambda batches: batches, "id long").count()
spark.stop()
"""


def parse_size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1_000}k" if n % 1_000 == 0 else str(n)


@dataclass
class StepRun:
    step: str
    n: int
    tree: TreeRun
    log: _eventlog.EventLogStats
    result: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- running a step


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return dag_env(REPO, extra)


def submit(app: Path, args: list[str], work: Path, name: str, cores: int,
           env: dict[str, str] | None = None) -> tuple[TreeRun, _eventlog.EventLogStats, dict]:
    events = work / f"events-{name}"
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    result = work / f"result-{name}.json"
    result.unlink(missing_ok=True)
    argv = [str(Path(sys.executable).with_name("spark-submit")), "--master", f"local[{cores}]",
            "--name", f"statekeeper-bench-{name}"]
    argv += [str(app), *args]
    if app.parent == REPO / "spark_jobs":
        argv += ["--result-json", str(result)]
    with dag_conf(REPO, _env(env)) as conf:
        settings = []
        for k, v in {**conf, **_eventlog.spark_conf(events)}.items():
            settings += ["--conf", f"{k}={v}"]
        tree = run_tree([*argv[:5], *settings, *argv[5:]], script=str(app), env=_env(env),
                        log=work / f"log-{name}.txt")
    stats = _eventlog.parse(events)
    mapping = json.loads(result.read_text()) if result.exists() else {}
    return tree, stats, mapping


def empty_baseline(work: Path, cores: int, tag: str) -> StepRun:
    app = work / "empty_app.py"
    app.write_text(_EMPTY_APP)
    tree, stats, _ = submit(app, [], work, f"empty-{tag}", cores)
    if tree.returncode != 0:
        raise RuntimeError(f"the empty spark-submit failed; see {work / f'log-empty-{tag}.txt'}")
    return StepRun("empty", 0, tree, stats)


def run_step(step: str, n: int, roots: list[str], warehouse: str, work: Path, cores: int,
             env: dict[str, str] | None = None, tag: str = "") -> StepRun:
    entry, extra = STEPS[step]
    name = f"{step}-{tag or label(n)}"
    tree, stats, mapping = submit(REPO / "spark_jobs" / f"{entry}.py", ["--warehouse", warehouse, *extra(roots)],
                                  work, name, cores, env)
    if tree.returncode not in DONE:
        raise RuntimeError(f"{step} at {label(n)} exited {tree.returncode}: "
                           f"{mapping.get('error', '')}; see {work / f'log-{name}.txt'}")
    return StepRun(step, n, tree, stats, mapping)


# ----------------------------------------------------------------------------- reporting


def _mb(b: int) -> str:
    return f"{b / 2**20:7.0f}M"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b else "    -"


def _row(run: StepRun, empty: StepRun, list_read_s: float | None) -> str:
    """One size of one step; xempty is against the empty spark-submit measured beside that size."""
    t, lg = run.tree, run.log
    worst = lg.max_task
    share = f"{worst.max_task_records:>9} {100 * worst.max_task_records / run.n:5.1f}%" if worst else f"{'-':>9} {'':6}"
    phase = (worst.phase.split(": ", 1)[-1] if worst and worst.phase else "-")[:28]
    base = _ratio(t.wall_s, list_read_s) if list_read_s else "    -"
    return (f"  {label(run.n):>5} {t.wall_s:8.1f} {_ratio(t.wall_s, empty.tree.wall_s):>7} {base:>7} "
            f"{_mb(t.jvm_peak)} {_mb(lg.heap_peak)} {_mb(t.driver_peak)} {_mb(t.workers_peak)} {_mb(t.worker_max)} "
            f"{share} {lg.result_bytes / 2**20:8.1f}M {lg.tasks:6}  {phase}")


HEADER = (f"  {'N':>5} {'wall s':>8} {'xempty':>7} {'xlist':>7} {'JVM RSS':>8} {'JVM heap':>8} {'py drv':>8} "
          f"{'workers':>8} {'1 worker':>8} {'max rec/task':>16} {'->driver':>9} {'tasks':>6}  phase of the max task")


def _growth(prev: StepRun, cur: StepRun) -> str:
    def g(a: float, b: float) -> str:
        return f"x{b / a:.2f}" if a else "-"

    t0, t1 = prev.tree, cur.tree
    m0 = prev.log.max_task.max_task_records if prev.log.max_task else 0
    m1 = cur.log.max_task.max_task_records if cur.log.max_task else 0
    line = (f"  {label(prev.n)}->{label(cur.n)} (N x{cur.n / prev.n:.2f}): wall {g(t0.wall_s, t1.wall_s)}, "
            f"JVM RSS {g(t0.jvm_peak, t1.jvm_peak)}, heap {g(prev.log.heap_peak, cur.log.heap_peak)}, "
            f"py driver {g(t0.driver_peak, t1.driver_peak)}, workers {g(t0.workers_peak, t1.workers_peak)}, "
            f"max rec/task {g(m0, m1)}, ->driver {g(prev.log.result_bytes, cur.log.result_bytes)}")
    if (prev.n, cur.n) == (300_000, 1_000_000):
        verdict = "met" if t1.wall_s / t0.wall_s <= 3.3 else "MISSED"
        line += f"  [goal wall <= x3.3: {verdict}]"
    return line


def report(runs: dict[str, list[StepRun]], empties: dict[int, StepRun], list_read: dict[int, float],
           title: str) -> None:
    print(f"\n=== {title}", flush=True)
    for n, empty in empties.items():
        print(f"  baselines beside {label(n)}: empty PySpark spark-submit {empty.tree.wall_s:.1f} s "
              f"(JVM {_mb(empty.tree.jvm_peak).strip()}, py driver {_mb(empty.tree.driver_peak).strip()}, "
              f"workers {_mb(empty.tree.workers_peak).strip()})"
              + (f"; single-process list+stat+read {list_read[n]:.1f} s" if n in list_read else ""))
    for step, rows in runs.items():
        if not rows:
            continue
        print(f"\n  -- {step}  (xlist = wall / single-process list+stat+read of the same store; the index lists "
              f"and parses inside its tasks, one per bin of job directories, which the event log counts as one "
              f"record each)" if step == "index" else f"\n  -- {step}")
        print(HEADER)
        for run in rows:
            print(_row(run, empties[run.n], list_read.get(run.n) if step == "index" else None))
        for prev, cur in zip(rows, rows[1:]):
            print(_growth(prev, cur))
        for run in rows:
            for task in run.log.abandoned:
                print(f"  WASTED at {label(run.n)}: a task of {task}")
    print(flush=True)


def summary_json(runs: dict[str, list[StepRun]], empties: dict[int, StepRun], list_read: dict[int, float],
                 backend: str) -> dict:
    out = {"bench": NAME, "backend": backend,
           "empty_spark_submit_s": {label(n): round(e.tree.wall_s, 2) for n, e in empties.items()},
           "list_read_s": {label(n): round(s, 2) for n, s in list_read.items()}, "steps": {}}
    for step, rows in runs.items():
        out["steps"][step] = [{
            "n": r.n, "wall_s": round(r.tree.wall_s, 2), "ratio_empty": round(r.tree.wall_s / empties[r.n].tree.wall_s, 2),
            "jvm_peak": r.tree.jvm_peak, "jvm_heap_peak": r.log.heap_peak, "driver_peak": r.tree.driver_peak,
            "workers_peak": r.tree.workers_peak, "worker_max": r.tree.worker_max,
            "max_task_records": r.log.max_task.max_task_records if r.log.max_task else 0,
            "max_task_phase": r.log.max_task.phase if r.log.max_task else "",
            "result_bytes": r.log.result_bytes, "tasks": r.log.tasks, "exit": r.tree.returncode} for r in rows]
    return out


# ----------------------------------------------------------------------------- local and S3 runs


def _list_read(roots: list[str]) -> float:
    from bench.index_store import _baseline_local

    _baseline_local(roots)            # the page cache warm, as for the jobs that follow
    data = _baseline_local(roots)
    return data["wall_s"]


def run_local(args, sizes: list[int], versions: list[str], work: Path) -> dict[str, list[StepRun]]:
    runs: dict[str, list[StepRun]] = {s: [] for s in args.steps}
    list_read: dict[int, float] = {}
    empties: dict[int, StepRun] = {}
    try:
        _run_sizes(args, sizes, versions, work, runs, list_read, empties)
    except KeyboardInterrupt:
        # A long run stopped early still reports the sizes it measured (the last may be partial).
        print("\ninterrupted: reporting what was measured", flush=True)
    report(runs, empties, list_read, f"local disk, local[{args.cores}], sizes {', '.join(map(label, sizes))}")
    print(json.dumps(summary_json(runs, empties, list_read, "local")), flush=True)
    return runs


def _run_sizes(args, sizes: list[int], versions: list[str], work: Path, runs: dict[str, list[StepRun]],
               list_read: dict[int, float], empties: dict[int, StepRun]) -> None:
    for n in sizes:
        store, info = cached_store(n, metadata_for(n, args), versions, lambda m: print(m, flush=True))
        roots = [str(store / "checkpoints"), str(store / "savepoints")]
        print(f"store {label(n)}: {info['objects']} objects, {info['metadata']} _metadata, "
              f"{info['fixture_copies']} fixture copies, {info['cross_job_paths']} cross-job paths in "
              f"{info['metadata_cross_job']} _metadata ({store})", flush=True)
        list_read[n] = _list_read(roots)
        # The floor is measured again beside every size: the machine's load drifts over a long run.
        empties[n] = empty_baseline(work, args.cores, label(n))
        print(f"  list+stat+read baseline: {list_read[n]:.1f} s; empty PySpark spark-submit: "
              f"{empties[n].tree.wall_s:.1f} s", flush=True)
        warehouse = work / f"wh-{label(n)}"
        shutil.rmtree(warehouse, ignore_errors=True)
        for step in args.steps:
            run = run_step(step, n, roots, str(warehouse), work, args.cores)
            runs[step].append(run)
            print(f"  {step:9} {run.tree.wall_s:7.1f} s  exit {run.tree.returncode}  {_brief(run)}", flush=True)
            print(_row(run, empties[n], list_read[n] if step == "index" else None), flush=True)
            if step == "index":
                assert run.result.get("objects_listed") == info["objects"], run.result
        if not args.keep_work:
            shutil.rmtree(warehouse, ignore_errors=True)


def _brief(run: StepRun) -> str:
    keys = ("status", "objects_listed", "metadata_parsed", "snapshots", "dependencies", "findings", "candidates",
            "planned", "planned_bytes")
    return json.dumps({k: run.result[k] for k in keys if k in run.result})[:200]


def metadata_for(n: int, args) -> int:
    return max(1, n * args.metadata_per_100k // 100_000)


def upload_rewritten(store: Path, target: str, config, threads: int = 16) -> int:
    """Upload `store` to `target` (s3://bucket/prefix); each `_metadata` is rewritten with the codec
    so its paths name the uploaded objects (a plain upload would keep file:// paths)."""
    from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes
    from statekeeper.storage.s3 import make_s3_client, split_s3_uri
    from statekeeper.uri import normalize_uri

    bucket, prefix = split_s3_uri(target)
    client = make_s3_client(config.with_overrides(max_pool_connections=threads + 4))
    mapping = {normalize_uri(str(store)): target}
    files = [Path(d) / f for d, _, names in os.walk(store) for f in names]
    t, done = time.perf_counter(), [0]

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(store).as_posix()}".lstrip("/")
        if path.name == "_metadata":
            result = rewrite_prefixes(read_metadata(path, normalize_uri(str(path))), mapping)
            if result.unmapped:
                raise RuntimeError(f"{path}: paths outside the store: {result.unmapped[:3]}")
            client.put_object(Bucket=bucket, Key=key, Body=to_bytes(result.model, inline_source=path))
        else:
            client.upload_file(str(path), bucket, key)
        done[0] += 1
        if done[0] % 10_000 == 0:
            print(f"  uploaded {done[0]}/{len(files)} ({time.perf_counter() - t:.0f} s)", flush=True)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(put, files))
    return len(files)


def run_s3(args, versions: list[str], work: Path) -> None:
    sys.path[:0] = [str(REPO / "include"), str(REPO)]
    from tests.plugins.s3 import MotoServer, make_bucket

    n = args.s3_objects
    store, info = cached_store(n, metadata_for(n, args), versions, lambda m: print(m, flush=True))
    print(f"\nS3: uploading {info['objects']} objects to a moto server on loopback (slow: moto takes a few "
          f"hundred puts/s here; nothing is kept between runs) ...", flush=True)
    server = MotoServer(work / "moto.log")
    try:
        config = server.config()
        bucket = make_bucket(config, "scale")
        t = time.perf_counter()
        upload_rewritten(store, f"s3://{bucket}/store", config)
        print(f"  upload took {time.perf_counter() - t:.0f} s (not measured)", flush=True)
        roots = [f"s3://{bucket}/store/checkpoints", f"s3://{bucket}/store/savepoints"]
        env = {"STATEKEEPER_S3_ENDPOINT": config.endpoint, "AWS_ACCESS_KEY_ID": config.access_key_id,
               "AWS_SECRET_ACCESS_KEY": config.secret_access_key, "AWS_REGION": config.region,
               "AWS_DEFAULT_REGION": config.region, "STATEKEEPER_S3_PATH_STYLE": "true"}
        runs: dict[str, list[StepRun]] = {s: [] for s in args.steps if s in S3_STEPS}
        empties = {n: empty_baseline(work, args.cores, f"s3-{label(n)}")}
        for step in runs:
            run = run_step(step, n, roots, f"s3://{bucket}/warehouse", work, args.cores, env, tag=f"s3-{label(n)}")
            runs[step].append(run)
            print(f"  {step:9} {run.tree.wall_s:7.1f} s  exit {run.tree.returncode}  {_brief(run)}", flush=True)
        report(runs, empties, {}, f"moto S3 on loopback, local[{args.cores}], {label(n)} objects")
        print(json.dumps(summary_json(runs, empties, {}, "s3-moto")), flush=True)
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench scale", description=DESCRIPTION,
                                epilog="Timings are noisy on a shared machine; read ratios and growth factors.")
    p.add_argument("--sizes", default="100k,300k,1m", help="store sizes in objects, e.g. 100k,300k,1m")
    p.add_argument("--metadata-per-100k", type=int, default=1_000, help="_metadata per 100k objects")
    p.add_argument("--s3-objects", type=parse_size, default=100_000,
                   help="objects of the store run against moto S3 (default 100k; uploading takes minutes)")
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--steps", default="index,chains,validate,gc",
                   help=f"comma-separated, in DAG order, from {','.join(STEPS)} (each needs the ones before)")
    p.add_argument("--cores", type=int, default=2, help="local[N] of every spark-submit")
    p.add_argument("--keep-work", action="store_true", help="keep warehouses, logs and event logs")
    args = p.parse_args(argv)
    args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        p.error(f"unknown steps {sorted(unknown)}; choose from {list(STEPS)}")
    sizes = sorted(parse_size(s) for s in args.sizes.split(",") if s.strip())
    sys.path[:0] = [str(REPO / "include"), str(REPO)]
    import tests.harness as harness

    versions = list(harness.FLINK_VERSIONS)
    work = Path(tempfile.mkdtemp(prefix="statekeeper-bench-scale-"))
    print(f"work directory {work}; Flink fixtures {', '.join(versions)}", flush=True)
    try:
        if sizes:
            run_local(args, sizes, versions, work)
        if not args.skip_s3:
            run_s3(args, versions, work)
    finally:
        if args.keep_work:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
