"""The index job: explicit options in, a result object with counts out (like Iceberg's actions).

    result = (IndexCheckpoints(spark)
              .roots("s3://bucket/checkpoints", "s3://bucket/savepoints")
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .execute())

One run: plan bucket partitions on the driver (the buckets of each root's child directories + the
buckets indexed before), index their job directories ("units") in Spark tasks (list, classify,
parse changed `_metadata` streaming from storage; a bucket with a changed unit is rewritten),
commit `files`, `snapshots`, `references`, `inline_state` through one change set (one Delta commit
per table, strictly against the versions planned from), then append an `index_runs` audit row.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper import __version__
from statekeeper.index.planner import balance, plan_buckets
from statekeeper.index.task import IndexTask, encode_previous
from statekeeper.index.unit import UnitStats
from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO, StorageConfig
from statekeeper.tables import cut, delta_log
from statekeeper.tables.catalog import INDEX_RUNS, INDEX_TABLES
from statekeeper.tables.errors import TableError
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.index")

SUCCEEDED = "succeeded"
PARTIAL = "partial"      # some units could not be listed; their previous rows were kept
FAILED = "failed"        # nothing was committed to the index tables


@dataclass(frozen=True)
class IndexResult:
    run_id: str
    status: str
    started_at: datetime
    finished_at: datetime
    roots: tuple[str, ...]
    warehouse: str
    engine: str
    stats: UnitStats
    table_versions: dict[str, int | None] = field(default_factory=dict)
    error: str | None = None
    repairs: tuple[str, ...] = ()    # index tables restored to the last audited run before planning

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def __getattr__(self, name: str) -> Any:  # counters read as attributes: result.metadata_parsed
        if name in UnitStats.COUNTERS:
            return getattr(self.stats, name)
        raise AttributeError(name)

    @property
    def errors(self) -> list[str]:
        return self.stats.errors

    def summary(self) -> str:
        s = self.stats
        rate = s.objects_listed / self.seconds if self.seconds else 0.0
        mrate = s.metadata_parsed / self.seconds if self.seconds else 0.0
        return (f"index run {self.run_id} {self.status} in {self.seconds:.1f}s: {s.units} units "
                f"({s.units_rewritten} rewritten, {s.units_unchanged} unchanged, {s.units_failed} failed), "
                f"{s.objects_listed} objects ({rate:.0f}/s), {s.metadata_found} _metadata "
                f"({s.metadata_parsed} parsed at {mrate:.1f}/s, {s.metadata_reused} reused, "
                f"{s.metadata_failed} not ok); table versions {self.table_versions}"
                + (f"; repaired a torn cut first ({'; '.join(self.repairs)})" if self.repairs else ""))

    def to_mapping(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat(), "seconds": round(self.seconds, 3),
                "roots": list(self.roots), "warehouse": self.warehouse, "engine": self.engine,
                **self.stats.to_mapping(), "table_versions": self.table_versions, "repairs": list(self.repairs),
                "error": self.error}


class IndexCheckpoints:
    """Builder for one index run. Every option is explicit; `execute()` runs it."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._roots: list[str] = []
        self._warehouse: str | Warehouse | None = None
        self._storage: StorageConfig | None = None
        self._engine = "auto"
        self._parallelism: int | None = None
        self._job_filter: str | None = None
        self._run_id: str | None = None
        self._airflow_run_id: str | None = None
        self._interval: tuple[datetime | None, datetime | None] = (None, None)
        self._progress_interval = 10.0
        self._allow_empty_root = False

    def roots(self, *uris: str) -> IndexCheckpoints:
        self._roots.extend(uris)
        return self

    def warehouse(self, location: str | Warehouse) -> IndexCheckpoints:
        self._warehouse = location
        return self

    def storage(self, config: StorageConfig) -> IndexCheckpoints:
        self._storage = config
        return self

    def engine(self, name: str) -> IndexCheckpoints:
        self._engine = name
        return self

    def parallelism(self, tasks: int) -> IndexCheckpoints:
        if tasks < 1:
            raise ValueError("parallelism must be >= 1")
        self._parallelism = tasks
        return self

    def job_filter(self, glob: str | None) -> IndexCheckpoints:
        self._job_filter = glob or None
        return self

    def run_id(self, run_id: str) -> IndexCheckpoints:
        self._run_id = run_id
        return self

    def airflow_run(self, run_id: str | None, data_interval_start: datetime | None = None,
                    data_interval_end: datetime | None = None) -> IndexCheckpoints:
        self._airflow_run_id = run_id or None
        self._interval = (data_interval_start, data_interval_end)
        return self

    def progress_interval(self, seconds: float) -> IndexCheckpoints:
        self._progress_interval = seconds
        return self

    def allow_empty_root(self, allow: bool = True) -> IndexCheckpoints:
        """Accept an S3 root with no object under it (by default an error: it is usually a typo)."""
        self._allow_empty_root = allow
        return self

    # -- run ------------------------------------------------------------------------------------

    def execute(self) -> IndexResult:
        from statekeeper.tables.engine import select_engine
        from statekeeper.tables.spark import activate

        if not self._roots:
            raise ValueError("no roots given")
        if self._warehouse is None:
            raise ValueError("no warehouse given")
        storage = self._storage if self._storage is not None else StorageConfig.from_env()
        warehouse = (self._warehouse if isinstance(self._warehouse, Warehouse)
                     else Warehouse(self._warehouse, storage))
        roots = Roots(self._roots)
        roots.check_separate(warehouse.uri, "warehouse")
        run_id = self._run_id or f"idx-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        started = datetime.now(timezone.utc)
        spark = self._spark
        activate(spark)
        engine = select_engine(spark, self._engine)
        log.info("index run %s: roots %s, warehouse %s, engine %s", run_id, roots.uris, warehouse.uri, engine.name)

        t0 = time.monotonic()
        states = {spec.name: delta_log.load_state(warehouse, spec.name) for spec in INDEX_TABLES}
        for spec in INDEX_TABLES:
            delta_log.check_compatible(states[spec.name], spec)
        # A run that died between its table commits (or before its audit row) left tables ahead of
        # the last audited run; plan only from that run's state (statekeeper.tables.cut).
        _, repairs = cut.heal(warehouse, INDEX_TABLES, run_id)
        if repairs:
            states = {spec.name: delta_log.load_state(warehouse, spec.name) for spec in INDEX_TABLES}
        read_versions = {name: (None if s is None else s.version) for name, s in states.items()}
        storage_io = GuardedFileIO(RoutingFileIO(storage), roots)
        buckets = plan_buckets(storage_io, roots, states, self._job_filter, allow_empty_root=self._allow_empty_root)
        del states  # file lists now live in the bucket plans only
        # One task per core: a bucket is the unit of balance and cannot be split anyway, and each
        # extra task costs its own Python workers' setup. On local[2] (bench index_store) a full
        # run took 2.9 s with 2 tasks, 3.6 s with 4 and 3.8 s with 8.
        tasks = self._parallelism or max(1, spark.sparkContext.defaultParallelism)
        bins = balance(buckets, tasks)
        job_dirs = sum(len(b.plan.job_dirs) for b in buckets)
        log.info("index run %s: %d job dirs in %d buckets in %d tasks (previous versions %s), planned in %.1fs",
                 run_id, job_dirs, len(buckets), len(bins), read_versions, time.monotonic() - t0)

        accumulators = {name: spark.sparkContext.accumulator(0) for name in
                        ("units", "objects_listed", "metadata_parsed", "metadata_reused")}
        # The plans travel inside the task function (a few KB: buckets and their data file
        # lists); each of the `len(bins)` Spark tasks gets one id from a JVM range and indexes
        # that bin, so no Python stage is needed just to hand plans to the tasks.
        plans = [[(b.plan.root.uri, b.plan.bucket, b.plan.job_dirs, encode_previous(b.plan.previous))
                  for b in group] for group in bins]
        # Tasks write the parquet files themselves only for delta-rs, whose change set writer
        # commits producer-written files; delta-spark writes files from `add` rows.
        task = IndexTask(roots.uris, storage, warehouse, run_id, accumulators, plans, self._job_filter,
                         write_files=engine.name == "delta-rs")
        from statekeeper.tables.datasource import CHANGESET_SCHEMA

        changes = spark.range(0, len(plans), 1, numPartitions=max(1, len(plans))).mapInArrow(task, CHANGESET_SCHEMA)
        metadata = {"statekeeper.runId": run_id, "statekeeper.operation": "index"}
        progress = _Progress(accumulators, job_dirs, self._progress_interval, run_id)
        progress.start()
        try:
            outcome = engine.commit_changeset(changes, warehouse, list(INDEX_TABLES), read_versions,
                                              metadata=metadata)
        except BaseException as exc:
            progress.stop()
            finished = datetime.now(timezone.utc)
            # A failed row never names a cut: readers take `succeeded` rows, the next run heals
            # from the last succeeded or partial one. Its versions are those it planned from.
            result = IndexResult(run_id, FAILED, started, finished, tuple(roots.uris), warehouse.uri, engine.name,
                                 UnitStats(errors=[f"{type(exc).__name__}: {exc}"]), read_versions,
                                 error=f"{type(exc).__name__}: {exc}", repairs=tuple(r.describe() for r in repairs))
            self._audit(engine, warehouse, result)
            raise
        progress.stop()
        t1 = time.monotonic()
        log.info("index run %s: indexed and committed in %.1fs", run_id, t1 - t0)
        stats = UnitStats()
        task_seconds = []
        for note in outcome.notes:
            if isinstance(note, dict) and note.get("kind") == "index_task":
                stats.add(UnitStats.from_mapping(note), max_errors=200)
                task_seconds.append(float(note.get("seconds", 0.0)))
        log.info("index run %s: %d tasks, %.1fs in task functions (longest %.1fs)", run_id, len(task_seconds),
                 sum(task_seconds), max(task_seconds, default=0.0))
        versions = {name: (outcome.committed[name].version if name in outcome.committed
                           and outcome.committed[name].version is not None else read_versions[name])
                    for name in read_versions}
        status = SUCCEEDED if stats.units_failed == 0 else PARTIAL
        result = IndexResult(run_id, status, started, datetime.now(timezone.utc), tuple(roots.uris), warehouse.uri,
                             engine.name, stats, versions, repairs=tuple(r.describe() for r in repairs))
        self._audit(engine, warehouse, result)
        log.info("index run %s: audit row written in %.1fs", run_id, time.monotonic() - t1)
        log.info("%s", result.summary())
        return result

    def _audit(self, engine: Any, warehouse: Warehouse, result: IndexResult) -> None:
        """Append the run's row to `index_runs` (plain append: audit rows never conflict)."""
        row = {
            "run_id": result.run_id, "status": result.status, "started_at": result.started_at,
            "finished_at": result.finished_at, "roots": list(result.roots), "warehouse": result.warehouse,
            "engine": result.engine, "statekeeper_version": __version__,
            **{name: getattr(result.stats, name) for name in UnitStats.COUNTERS},
            "errors": result.stats.errors[:200],
            "table_versions": [(k, v) for k, v in result.table_versions.items() if v is not None],
            "data_interval_start": self._interval[0], "data_interval_end": self._interval[1],
            "airflow_run_id": self._airflow_run_id,
            "options": json.dumps({"engine": self._engine, "parallelism": self._parallelism,
                                   "job_filter": self._job_filter}),
        }
        import pyarrow as pa

        table = pa.Table.from_pylist([row], schema=INDEX_RUNS.schema)
        try:
            engine.append_rows(self._spark, warehouse, INDEX_RUNS, table, metadata={"statekeeper.runId": result.run_id})
        except TableError:
            if result.status != FAILED:
                raise
            log.exception("could not record the failed run %s in index_runs", result.run_id)


class _Progress:
    """Logs live progress from Spark accumulators (updated as tasks finish)."""

    def __init__(self, accumulators: dict[str, Any], total_units: int, interval: float, run_id: str) -> None:
        self._acc = accumulators
        self._total = total_units
        self._interval = interval
        self._run_id = run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statekeeper-index-progress", daemon=True)
        self._started = time.monotonic()

    def start(self) -> None:
        if self._interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            elapsed = time.monotonic() - self._started
            v = {k: a.value for k, a in self._acc.items()}
            log.info("index run %s: %d/%d units, %d objects listed (%.0f/s), %d _metadata parsed (%.1f/s), "
                     "%d reused", self._run_id, v["units"], self._total, v["objects_listed"],
                     v["objects_listed"] / elapsed, v["metadata_parsed"], v["metadata_parsed"] / elapsed,
                     v["metadata_reused"])
