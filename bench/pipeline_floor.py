"""Benchmark: what every run of every job costs as the DAG runs it, against an empty PySpark job.

Each job runs as its own `spark-submit` (fresh JVM and Python driver, local[2], the DAG operator's
Spark settings and its --py-files zip), on the sample store `make demo` indexes (2.3.0: a cross-job
chain, savepoints, a failed checkpoint and orphans; 17 snapshots, ~160 objects) and on an empty
store. Interleaved with them, in the same run, an empty PySpark `spark-submit` (a session started
and stopped): the floor nothing on this machine can go below. Per job: median wall time, its ratio
to the empty job (goal <= 1.5 on the sample store), peak RSS of the largest process, and how many
Spark jobs, stages and tasks it ran (from Spark's event log, which every run here writes, the empty
one included).

Jobs (the maintenance DAG's, in its order): index (the first run, then over unchanged storage),
two probes that are no job but show what the 1.5x goal leaves room for on this machine (probe_query: the
session as the jobs start it, two index tables read as the jobs read them, one grouped count joined to the
snapshots and collected; probe_python: the same plus one pass of the references through a Python task, as
every job's locate step makes; not run in --driver rounds),
chains, validate (with the quality suite, and without it so its cost shows separately), gc (plan
mode) and compact (dry run); then the DR job end to end (`copy_to_dr`: select, closure, copy, verify,
rewritten `_metadata`, audit rows) into a fresh local target, reported also against the first index run
over the same roots (goal <= 2x); then DR follow mode (`--mode follow`): a first round into a target of
its own, and a round after it with nothing new (goal <= 1.5x the empty job). With --dag also the whole `checkpoint_maintenance` DAG via
`dag.test()` on the sample store (goal: <= 2 minutes warm on 2 cores).

With --driver, each round also runs its steps as a DAG run on a local master now runs them: in one
shared driver (statekeeper.launch.warm_driver) started once under spark-submit with the same settings, each
step sent to it in the round's order. The driver's start-up is reported on its own line, each step
against the same empty spark-submit, and the round's total against the steps' own spark-submits.

    python -m bench pipeline_floor [--repeat 3] [--steps index,chains,...] [--stores sample,empty]
                                   [--warehouse local|s3] [--dag] [--driver] [--checkout PATH] [--against PATH]
                                   [--events DIR]

--warehouse s3 puts every job's warehouse on a real S3 server (SeaweedFS on loopback, one bucket, for the whole
run), its endpoint and keys in the jobs' environment as the operator gives them from a storage connection; the
checkpoint roots and the DR targets stay local (default: local, every warehouse a directory of the work dir).

--checkout runs the jobs of another checkout (e.g. a worktree of an older commit) with this
benchmark, so a before/after comparison uses the same measurement. --against PATH runs the jobs of
a second checkout (the "before", e.g. `git worktree add /tmp/before HEAD~1`) in the same rounds,
interleaved with --checkout's (the order alternates round by round, so a drift of the machine falls on
both), each with its own library zip and settings, and prints both medians of wall and CPU time per job
and their ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench._measure import measure
from bench._submit import connection_env, dag_conf, dag_env, library_zip

if TYPE_CHECKING:
    from statekeeper.storage import StorageConfig

NAME = "pipeline_floor"
DESCRIPTION = "each job as the DAG submits it (fresh JVM) vs an empty PySpark spark-submit; the DAG's wall time"
REPO = Path(__file__).resolve().parents[1]

_EMPTY_JOB = """\
from pyspark.sql import SparkSession
SparkSession.builder.appName("empty").getOrCreate().stop()
"""
# The least a job that reads the index can cost: the session as the jobs start it, two index tables read as
# they read them, the cut check's query (a grouped count joined to the snapshots, collected), and for
# probe_python one pass of the references through a Python task, as every job's locate step makes one.
_PROBE_JOB = """\
import sys
from pyspark.sql import functions as F
from statekeeper.launch.entrypoint import spark_session
from statekeeper.storage import StorageConfig
from statekeeper.tables.engine import select_engine
from statekeeper.launch.session import activate
from statekeeper.tables.warehouse import Warehouse


def same(batches):
    yield from batches


with spark_session("probe") as spark:
    activate(spark)
    engine, warehouse = select_engine(spark, "auto"), Warehouse(sys.argv[1], StorageConfig.from_env())
    refs, snaps = engine.read(spark, warehouse, "references"), engine.read(spark, warehouse, "snapshots")
    (refs.groupBy("snapshot_uri").agg(F.count(F.lit(1)).alias("rows"))
     .join(snaps.select(F.col("uri").alias("snapshot_uri")), "snapshot_uri", "full_outer").collect())
    if sys.argv[2] == "python":
        refs.select("snapshot_uri").mapInArrow(same, "snapshot_uri string").collect()
"""
# The GC step plans with the DAG's default rules; the newest index run is the one just made.
STEPS = ("index_first", "index", "probe_query", "probe_python", "chains", "validate", "validate_no_suite", "gc",
         "compact", "report", "dr_copy", "dr_follow", "dr_follow_idle")
_PROBE_WORDS = {"probe_query": "read two tables and run one query", "probe_python": "the same plus one Python task"}
PROBES = tuple(_PROBE_WORDS)
# Jobs that refuse to run without tables another job derives: the DR job reads chains and validation,
# compaction validation (it never compacts a snapshot validation calls broken), GC the chains of the cut it
# plans on (without them it stops at its guards with exit 1, and --steps gc measured that).
_READS_DERIVED = {"dr_copy": ("chains", "validate"), "compact": ("validate",), "gc": ("chains",)}


@dataclass
class Figures:
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)   # user + system of the whole process tree
    rss: list[int] = field(default_factory=list)
    sites: list[list[tuple[str, str, float]]] = field(default_factory=list)  # per run: (phase, call site, s) per Spark job
    spark: list[tuple[int, int, int]] = field(default_factory=list)  # jobs, stages, tasks
    codes: list[int] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.walls) if self.walls else float("nan")

    def cpu_median(self) -> float:
        return statistics.median(self.cpus) if self.cpus else float("nan")


class Submitter:
    """spark-submit as the DAG's operator builds it for a local master."""

    def __init__(self, checkout: Path, work: Path) -> None:
        self.checkout = checkout
        self.work = work
        self.zip = library_zip(checkout, work)
        self.events = work / "events"
        self.keep_events: Path | None = None
        self.empty = work / "empty_job.py"
        self.empty.write_text(_EMPTY_JOB)
        self.probe = work / "probe_job.py"
        self.probe.write_text(_PROBE_JOB)
        self.binary = Path(sys.executable).with_name("spark-submit")
        self.env = {**os.environ, **dag_env(checkout)}
        self.s3_prefix: str | None = None

    def use_s3(self, storage: StorageConfig, bucket: str, label: str) -> None:
        """Put this checkout's warehouses under s3://<bucket>/<label>/. The endpoint and keys go into the jobs'
        environment, mapped by the checkout's own operator from an 'aws' connection's fields: that is how a DAG
        task gives them, and on argv they would show in `ps` and in the event log."""
        self.s3_prefix = f"s3://{bucket}/{label}"
        extra = {"endpoint_url": storage.endpoint, "region_name": storage.region,
                 "addressing_style": "path" if storage.use_path_style else "virtual"}
        self.env.update(connection_env(self.checkout, "aws", storage.access_key_id, storage.secret_access_key,
                                       extra))

    def warehouse(self, name: str) -> str:
        """Where the warehouse `name` of this checkout's jobs is: a directory of its work dir, or with use_s3 a
        prefix of the bucket."""
        return f"{self.s3_prefix}/{name}" if self.s3_prefix else str(self.work / name)

    def command(self, conf: dict[str, str]) -> list[str]:
        """spark-submit on local[2] with `conf` and the library zip, up to the application."""
        argv = [str(self.binary), "--master", "local[2]", "--deploy-mode", "client", "--py-files", str(self.zip)]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return argv

    def run(self, application: Path, args: list[str], figures: Figures, label: str, *,
            dag_settings: bool = True) -> None:
        events = self.events / f"{label}-{len(figures.walls)}"
        events.mkdir(parents=True)
        with dag_conf(self.checkout, self.env) if dag_settings else nullcontext({}) as base:
            conf = {**base, "spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                    "spark.eventLog.compress": "false", "spark.app.name": f"statekeeper-{label}"}
            m = measure([*self.command(conf), str(application), *args], env=self.env)
        figures.walls.append(m.wall_s)
        figures.cpus.append(m.cpu_s)
        figures.rss.append(m.peak_rss)
        figures.codes.append(m.returncode)
        counts, sites = _read_events(events)
        figures.spark.append(counts)
        figures.sites.append(sites)
        if m.returncode not in (0, 1):
            # the job's log goes to stdout, its JVM's warnings to stderr
            raise RuntimeError(f"{label} exited {m.returncode}:\n{m.stderr[-3000:]}\n{m.stdout[-6000:]}")
        if self.keep_events is not None:
            shutil.copytree(events, self.keep_events / events.relative_to(self.events), dirs_exist_ok=True)
        shutil.rmtree(events, ignore_errors=True)


class SharedDriver:
    """One round's shared driver: started under spark-submit as the run's setup task starts it (the DAG's
    settings for a local master), then each step sent to it as a task sends it."""

    def __init__(self, sub: Submitter, label: str) -> None:
        sys.path.insert(0, str(sub.checkout / "include"))
        from statekeeper.launch.warm_driver.client import DriverClient

        self.sub, self.client_type = sub, DriverClient
        self.socket = sub.work / f"{label}.sock"
        self.log = sub.work / f"{label}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> float:
        """Seconds until the driver answers."""
        with dag_conf(self.sub.checkout, self.sub.env) as base:
            argv = [*self.sub.command({**base, "spark.app.name": "statekeeper-driver"}),
                    str(self.sub.checkout / "spark_jobs" / "spark_driver.py"), "--socket", str(self.socket),
                    "--fingerprint", "bench", "--idle-timeout", "600"]
            started = time.perf_counter()
            with open(self.log, "wb") as out:
                self.process = subprocess.Popen(argv, env=self.sub.env, stdout=out, stderr=subprocess.STDOUT,
                                                start_new_session=True)
            while self.client_type(self.socket).ping() is None:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the shared driver exited {self.process.returncode}:\n"
                                       f"{self.log.read_text()[-3000:]}")
                time.sleep(0.05)
            return time.perf_counter() - started

    def run(self, entry: str, args: list[str], figures: Figures, label: str) -> None:
        started = time.perf_counter()
        code = self.client_type(self.socket).run("bench", entry, args, lambda line: None)
        figures.walls.append(time.perf_counter() - started)
        figures.codes.append(code if isinstance(code, int) else -1)
        if not isinstance(code, int) or code not in (0, 1):
            raise RuntimeError(f"{label} in the shared driver: {code}; its log: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.client_type(self.socket).stop()
            self.process.wait(timeout=120)


def _mapped_archive(sub: Submitter) -> str:
    """Which class-data-sharing archive a checkout's local drivers map (it decides much of a small job's CPU)."""
    with dag_conf(sub.checkout, sub.env) as base:
        options = base.get("spark.driver.extraJavaOptions", "").split()
    mapped = [o.split("=", 1)[1] for o in options if o.startswith("-XX:SharedArchiveFile=")]
    if not mapped:
        return "no class archive"
    name = Path(mapped[0]).name
    return name + (" (every job's classes, written by a DAG run's shared driver)" if name.endswith("-pipeline.jsa")
                   else " (written by the first local job)")


def _read_events(events: Path) -> tuple[tuple[int, int, int], list[tuple[str, str, float]]]:
    """One pass over a run's event log: (Spark jobs, stages, tasks), and the (phase, call site, seconds)
    of every Spark job. The phase is the job description the statekeeper jobs set per phase, the call
    site the Python line PySpark names (e.g. `count at .../replicate/job.py:297`), so a job that runs
    more Spark jobs than it needs shows where."""
    stages = tasks = 0
    started: dict[int, tuple[str, str, int]] = {}
    ended: dict[int, int] = {}
    for log in events.rglob("*"):
        if not log.is_file() or log.name.startswith("."):
            continue
        for line in log.open(encoding="utf-8", errors="replace"):
            if '"Event":"SparkListenerJobStart"' in line:
                event = json.loads(line)
                props = event.get("Properties") or {}
                started[event["Job ID"]] = (props.get("spark.job.description") or "",
                                            _short_site(props.get("callSite.short") or "?"),
                                            event.get("Submission Time", 0))
            elif '"Event":"SparkListenerJobEnd"' in line:
                event = json.loads(line)
                ended[event["Job ID"]] = event.get("Completion Time", 0)
            elif '"Event":"SparkListenerStageCompleted"' in line:
                stages += 1
            elif '"Event":"SparkListenerTaskEnd"' in line:
                tasks += 1
    sites = [(phase, site, max(0, ended.get(job, at) - at) / 1000) for job, (phase, site, at) in sorted(started.items())]
    return (len(started), stages, tasks), sites


def _short_site(site: str) -> str:
    """The call site below the library or job directory: the checkout's own path (or the zip's) is noise."""
    head, _, where = site.partition(" at ")
    for marker in ("statekeeper.zip/", "include/", "spark_jobs/"):
        if marker in where:
            return f"{head} at {where[where.index(marker) + len(marker):]}"
    return site


def _print_sites(label: str, sites: list[tuple[str, str, float]]) -> None:
    groups: dict[tuple[str, str], list[float]] = {}
    for phase, site, seconds in sites:
        groups.setdefault((site, phase), []).append(seconds)
    total = sum(s for _, _, s in sites)
    print(f"\n{label}: {len(sites)} Spark job(s), {total:.1f}s in jobs (last run), by call site and phase")
    for (site, phase), secs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {len(secs):4d} {sum(secs):6.1f}s  {site:64.64}  {phase[:50]}")


def _run_steps(sub: Submitter, steps: list[str], roots: list[str], name: str,
               figures: dict[str, Figures]) -> None:
    """One round of `steps` of `sub`'s checkout on a fresh warehouse `name`, each into its Figures."""
    jobs = sub.checkout / "spark_jobs"
    warehouse, local = sub.warehouse(name), sub.work / name
    if "index_first" not in steps:  # every other job reads an index: make one, unmeasured
        entry, job_args = _step_args("index_first", roots, warehouse, local)
        sub.run(jobs / f"{entry}.py", job_args, Figures(), "unmeasured-index")
    for step in steps:
        if step == "dr_follow_idle" and "dr_follow" not in steps:   # idle: after a first round
            entry, job_args = _step_args("dr_follow", roots, warehouse, local)
            sub.run(jobs / f"{entry}.py", job_args, Figures(), "unmeasured-follow")
        for needed in _READS_DERIVED.get(step, ()):   # made unmeasured when the round does not measure them
            if needed not in steps:
                entry, job_args = _step_args(needed, roots, warehouse, local)
                sub.run(jobs / f"{entry}.py", job_args, Figures(), f"unmeasured-{needed}")
        entry, job_args = _step_args(step, roots, warehouse, local)
        sub.run(jobs / f"{entry}.py" if entry else sub.probe, job_args, figures[step], step)


def _print_before_after(before: Path, after: Path, figures: dict[tuple[str, str], Figures],
                        before_figures: dict[tuple[str, str], Figures]) -> None:
    print(f"\nbefore/after, interleaved: before = {before}, after = {after}; medians of "
          f"{len(next(iter(figures.values())).walls)} run(s) each, wall and CPU (user + system of the job's processes)")
    print(f"{'store':7} {'job':18} {'before s':>9} {'after s':>8} {'after/before':>12} "
          f"{'before CPU':>10} {'after CPU':>9} {'after/before':>12}  exit")
    for key, f in figures.items():
        b = before_figures[key]
        print(f"{key[0]:7} {key[1]:18} {b.median():9.1f} {f.median():8.1f} {f.median() / b.median():12.3f} "
              f"{b.cpu_median():10.1f} {f.cpu_median():9.1f} {f.cpu_median() / b.cpu_median():12.3f}  "
              f"{sorted(set(b.codes))} {sorted(set(f.codes))}")


def _sample_roots(checkout: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", "from statekeeper.dev.demo import sample_store_roots; import json; "
                               "print(json.dumps(sample_store_roots()))"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _step_args(step: str, roots: list[str], warehouse: str, local: Path) -> tuple[str, list[str]]:
    """`local`: the directory a local warehouse of the same name would be (the warehouse itself with --warehouse
    local); the DR targets are directories beside it whatever the warehouse is on."""
    common = ["--warehouse", warehouse, "--run-id", f"bench-{step}"]
    root_args = ["--roots", ",".join(roots)]
    follow = [*common, "--mode", "follow", "--target", str(local.parent / f"dr-follow-{local.name}"),
              "--allowed-targets", str(local.parent)]
    return {
        "index_first": ("index_checkpoints", [*root_args, *common, "--allow-empty-root"]),
        "index": ("index_checkpoints", [*root_args, *common, "--allow-empty-root"]),
        "probe_query": ("", [warehouse, "query"]),
        "probe_python": ("", [warehouse, "python"]),
        "chains": ("compute_chains", common),
        "validate": ("validate_checkpoints", [*common, *root_args]),
        "validate_no_suite": ("validate_checkpoints", [*common, *root_args, "--no-quality-suite"]),
        "gc": ("collect_garbage", [*common, "--mode", "plan"]),
        "compact": ("compact_checkpoints", [*common, "--dry-run"]),
        "report": ("build_report", common),
        # A fresh target per warehouse (one per round): the copy, not a skip pass, is what is measured.
        "dr_copy": ("copy_to_dr", [*common, "--target", str(local.parent / f"dr-{local.name}"),
                                   "--allowed-targets", str(local.parent)]),
        # Follow mode: a first round copies each job's newest checkpoint to a target of its own; the
        # idle round after it finds nothing new (what most rounds of a five-minute cadence are).
        "dr_follow": ("copy_to_dr", follow),
        "dr_follow_idle": ("copy_to_dr", follow),
    }[step]


@contextmanager
def _s3_bucket(work: Path) -> Iterator[tuple[StorageConfig, str]]:
    """A SeaweedFS S3 server on loopback (its data in the work dir) and one fresh bucket on it, for the whole run;
    the server is stopped on the way out, whatever ends the run."""
    # Here, not at the top: the test plugins import pytest and the storage layer, which a local run needs neither of.
    from tests.plugins.s3 import make_bucket
    from tests.plugins.seaweedfs import SeaweedFS

    base = work / "seaweedfs"
    base.mkdir()
    server = SeaweedFS(base)
    try:
        storage = server.config()
        yield storage, make_bucket(storage, "bench")
    finally:
        server.stop()


def _run_dag(checkout: Path, roots: list[str], work: Path) -> float:
    """Wall time of one `checkpoint_maintenance` dag.test() on a fresh warehouse (Airflow warm)."""
    code = ("import sys, time; from pathlib import Path; from statekeeper.dev.demo import run_dag; "
            f"t = time.perf_counter(); run_dag({roots!r}, {str(work / 'dag-warehouse')!r}, Path({str(work / 'airflow')!r}), "
            f"log=Path({str(work / 'dag.log')!r}), say=lambda line: None); "
            "print('DAG_WALL', time.perf_counter() - t)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "include"), str(checkout / "plugins"),
                                                         str(checkout)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=checkout)
    walls = [float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("DAG_WALL")]
    if out.returncode != 0 or not walls:
        raise RuntimeError(f"dag.test failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return walls[0]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench pipeline_floor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="runs of each job (medians are reported)")
    p.add_argument("--steps", default=",".join(STEPS), help=f"subset of {','.join(STEPS)}")
    p.add_argument("--stores", default="sample,empty", help="sample and/or empty")
    p.add_argument("--warehouse", choices=("local", "s3"), default="local",
                   help="where the jobs' warehouses are: directories of the work dir, or prefixes of one bucket on "
                        "a SeaweedFS S3 server started for the run (the roots and DR targets stay local)")
    p.add_argument("--dag", action="store_true", help="also time the whole maintenance DAG (dag.test, twice: "
                                                      "the first warms Airflow's database)")
    p.add_argument("--driver", action="store_true", help="also run each round's steps in one shared driver, as a DAG "
                                                         "run on a local master runs them")
    p.add_argument("--checkout", type=Path, default=REPO, help="run the jobs of this checkout")
    p.add_argument("--against", type=Path, default=None,
                   help="also run this checkout's jobs (the before), interleaved round by round, and compare")
    p.add_argument("--events", type=Path, default=None,
                   help="keep each run's Spark event log below this directory (<label>-<n>/), to read its timeline")
    p.add_argument("--jobs", action="store_true", help="also list each job's Spark jobs by phase and Python call "
                                                       "site (from the last run's event log)")
    args = p.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown:
        p.error(f"unknown steps {sorted(unknown)}")
    checkout = args.checkout.resolve()
    if args.against is not None and args.driver:
        p.error("--against compares the jobs' own spark-submits; run --driver without it")
    if args.dag and args.warehouse == "s3":
        p.error("--dag runs the DAG on a local warehouse (it has no storage connection here); run it without "
                "--warehouse s3")
    work = Path(tempfile.mkdtemp(prefix="statekeeper-bench-floor-"))
    with ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        sub = Submitter(checkout, work)
        before = None
        if args.against is not None:
            (work / "before").mkdir()
            before = Submitter(args.against.resolve(), work / "before")
        where = "local (directories of the work dir)"
        if args.warehouse == "s3":
            # Entered after the rmtree callback: the server is stopped before its data directory is removed.
            storage, bucket = cleanup.enter_context(_s3_bucket(work))
            sub.use_s3(storage, bucket, "checkout")
            if before is not None:
                before.use_s3(storage, bucket, "before")
            where = f"s3://{bucket}/ on SeaweedFS at {storage.endpoint}"
        if args.events is not None:
            sub.keep_events = args.events.resolve()
            if before is not None:
                before.keep_events = args.events.resolve() / "before"
        stores: dict[str, list[str]] = {}
        for store in args.stores.split(","):
            if store == "sample":
                stores[store] = _sample_roots(checkout)
            elif store == "empty":
                empty = work / "empty-store" / "checkpoints"
                empty.mkdir(parents=True)
                stores[store] = [empty.as_uri()]
            else:
                p.error(f"unknown store {store!r}")
        empty_job, empty_dag, driver_start = Figures(), Figures(), Figures()
        figures = {(store, step): Figures() for store in stores for step in steps}
        before_figures = {(store, step): Figures() for store in stores for step in steps}
        in_driver = {(store, step): Figures() for store in stores for step in steps}
        if args.driver and not (checkout / "spark_jobs" / "spark_driver.py").is_file():
            p.error(f"{checkout} has no shared driver (spark_jobs/spark_driver.py)")
        print(f"jobs of {checkout}" + (f", interleaved with those of {before.checkout}" if before else "")
              + f"; {args.repeat} round(s); warehouses {where}; work dir {work}", flush=True)
        # Not measured: the first local run writes the JVM's class-data-sharing archive when it exits
        # (in the DAG that is the index job, as here). On the run's kind of warehouse, so that the archive holds
        # the classes the jobs then load (S3A's with s3); each checkout on a warehouse of its own, as one
        # checkout's tables are not the other's to read.
        warm = work / "warm-up"
        (warm / "checkpoints").mkdir(parents=True)
        pairs = [(sub, figures), (before, before_figures)] if before else [(sub, figures)]
        for runner, _ in pairs:
            entry, job_args = _step_args("index_first", [(warm / "checkpoints").as_uri()],
                                         runner.warehouse("warehouse-warm-up"), runner.work / "warehouse-warm-up")
            runner.run(runner.checkout / "spark_jobs" / f"{entry}.py", job_args, Figures(), "warm-up")
            print(f"{runner.checkout}: its local drivers map {_mapped_archive(runner)}", flush=True)
        for round_ in range(args.repeat):
            for store, roots in stores.items():
                started = time.perf_counter()
                sub.run(sub.empty, [], empty_job, "empty", dag_settings=False)
                sub.run(sub.empty, [], empty_dag, "empty-dag-settings")
                for runner, into in (pairs if round_ % 2 == 0 else pairs[::-1]):
                    _run_steps(runner, steps, roots, f"warehouse-{store}-{round_}",
                               {step: into[(store, step)] for step in steps})
                if args.driver:
                    # The same steps on a warehouse of their own, in the order a DAG run sends them.
                    shared = SharedDriver(sub, f"driver-{store}-{round_}")
                    driver_start.walls.append(shared.start())
                    try:
                        name = f"warehouse-driver-{store}-{round_}"
                        warehouse, local = sub.warehouse(name), work / name
                        if "index_first" not in steps:
                            entry, job_args = _step_args("index_first", roots, warehouse, local)
                            shared.run(entry, job_args, Figures(), "unmeasured-index")
                        for step in steps:
                            if step in PROBES:   # not a job the driver knows; its own spark-submit is the figure
                                continue
                            if step == "dr_follow_idle" and "dr_follow" not in steps:
                                shared.run(*_step_args("dr_follow", roots, warehouse, local), Figures(),
                                           "unmeasured-follow")
                            for needed in _READS_DERIVED.get(step, ()):
                                if needed not in steps:
                                    shared.run(*_step_args(needed, roots, warehouse, local), Figures(),
                                               f"unmeasured-{needed}")
                            shared.run(*_step_args(step, roots, warehouse, local), in_driver[(store, step)], step)
                    finally:
                        shared.stop()
                print(f"  round {round_ + 1}/{args.repeat} {store}: {time.perf_counter() - started:.0f}s", flush=True)
        base, floor = empty_job.median(), empty_dag.median()
        print(f"\nempty PySpark spark-submit (spark-submit's defaults): median {base:.1f}s over "
              f"{len(empty_job.walls)} (min {min(empty_job.walls):.1f}, max {max(empty_job.walls):.1f}), "
              f"peak RSS {max(empty_job.rss) / 2**20:.0f} MiB")
        print(f"the same empty job with the DAG's settings for a local master: median {floor:.1f}s "
              f"({floor / base:.2f}x), peak RSS {max(empty_dag.rss) / 2**20:.0f} MiB")
        print(f"\n{'store':7} {'job':18} {'median s':>9} {'ratio':>6} {'vs DAG floor':>12} {'peak MiB':>9} "
              f"{'jobs':>5} {'stages':>6} {'tasks':>6}  exit")
        for (store, step), f in figures.items():
            jobs, stages, tasks = f.spark[-1]
            print(f"{store:7} {step:18} {f.median():9.1f} {f.median() / base:6.2f} {f.median() / floor:12.2f} "
                  f"{max(f.rss) / 2**20:9.0f} {jobs:5d} {stages:6d} {tasks:6d}  {sorted(set(f.codes))}")
        print("ratio: to the empty spark-submit (goal <= 1.5 on the sample store); vs DAG floor: to the empty job "
              "started as the DAG starts jobs")
        for store in stores:
            probes = [(step, figures[(store, step)].median()) for step in PROBES if (store, step) in figures]
            if probes:
                print(f"{store}: the least a job reading the index costs here: "
                      + "; ".join(f"{_PROBE_WORDS[step]} {wall:.1f}s ({wall / base:.2f}x)" for step, wall in probes))
            if (store, "dr_copy") in figures and (store, "index_first") in figures:
                dr, index = figures[(store, "dr_copy")].median(), figures[(store, "index_first")].median()
                print(f"{store}: the DR job end to end takes {dr:.1f}s, {dr / index:.2f}x the first index run over "
                      f"the same roots ({index:.1f}s; goal <= 2x)")
            if (store, "dr_follow_idle") in figures:
                idle = figures[(store, "dr_follow_idle")].median()
                print(f"{store}: a follow round with nothing new takes {idle:.1f}s, {idle / base:.2f}x the empty job "
                      "(goal <= 1.5x)")
            if (store, "dr_follow") in figures and (store, "dr_copy") in figures:
                fol, dr = figures[(store, "dr_follow")].median(), figures[(store, "dr_copy")].median()
                print(f"{store}: a follow round that copies takes {fol:.1f}s, {fol / dr:.2f}x the nightly DR job "
                      f"({dr:.1f}s), which also needs the index, chains and validation before it")
            if (store, "validate") in figures and (store, "validate_no_suite") in figures:
                suite = figures[(store, "validate")].median() - figures[(store, "validate_no_suite")].median()
                print(f"{store}: the quality suite costs {suite:.1f}s of validate "
                      f"({suite / base:.2f}x the empty job)")
        if args.driver:
            start = driver_start.median()
            print(f"\nin one shared driver per round (as a DAG run on a local master runs its steps): the driver "
                  f"answers after a median {start:.1f}s ({start / base:.2f}x the empty job)")
            print(f"{'store':7} {'job':18} {'median s':>9} {'ratio':>6} {'own spark-submit s':>19}")
            for (store, step), f in in_driver.items():
                print(f"{store:7} {step:18} {f.median():9.1f} {f.median() / base:6.2f} "
                      f"{figures[(store, step)].median():19.1f}")
            for store in stores:
                shared_total = start + sum(in_driver[(store, step)].median() for step in steps)
                own_total = sum(figures[(store, step)].median() for step in steps)
                print(f"{store}: the {len(steps)} steps take {shared_total:.1f}s with the driver's start-up, "
                      f"{own_total:.1f}s each as its own spark-submit ({shared_total / own_total:.2f}x)")
        if before is not None:
            _print_before_after(before.checkout, checkout, figures, before_figures)
        if args.jobs:
            for (store, step), f in figures.items():
                _print_sites(f"{store} {step}", f.sites[-1])
        if args.dag and "sample" in stores:
            _run_dag(checkout, stores["sample"], work / "dag-warm")
            wall = _run_dag(checkout, stores["sample"], work)
            print(f"\ncheckpoint_maintenance dag.test() on the sample store (Airflow warm): {wall:.0f}s "
                  f"({wall / base:.1f}x the empty job; goal <= 120s)")
    return 0
