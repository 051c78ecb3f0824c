"""The index job: explicit options in, a result object with counts out (like Iceberg's actions).

    result = (IndexCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .configure(IndexOptions(roots=("s3://bucket/checkpoints", "s3://bucket/savepoints")))
              .execute())

One run: plan bucket partitions on the driver (the buckets of each root's child directories + the
buckets indexed before), index their job directories ("units") in Spark tasks (list, classify,
parse changed `_metadata` streaming from storage; a bucket with a changed unit is rewritten),
commit `files`, `snapshots`, `references`, `inline_state` through one change set (one Delta commit
per table, strictly against the versions planned from), then append an `index_runs` audit row.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from statekeeper.index.options import IndexOptions
from statekeeper.index.planner import balance, plan_buckets
from statekeeper.index.task import IndexTask, encode_previous
from statekeeper.index.unit import UnitStats
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.result import JobResult
from statekeeper.registry import INDEX
from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO
from statekeeper.tables import cut, delta_log
from statekeeper.tables.catalog import INDEX_TABLES
from statekeeper.tables.changeset import CHANGESET_SCHEMA
from statekeeper.tables.vocabulary import IndexRunStatus

SUCCEEDED = IndexRunStatus.SUCCEEDED
PARTIAL = IndexRunStatus.PARTIAL
FAILED = IndexRunStatus.FAILED
_MAX_AUDITED_ERRORS = 200


@dataclass(frozen=True, kw_only=True)
class IndexResult(JobResult):
    roots: tuple[str, ...]
    engine: str
    stats: UnitStats
    repairs: tuple[str, ...] = ()    # index tables restored to the last audited run before planning

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
        mapping = super().to_mapping()
        del mapping["stats"]
        return {**mapping, **self.stats.to_mapping()}

    def audit_values(self) -> dict[str, Any]:
        return {"errors": self.stats.errors[:_MAX_AUDITED_ERRORS]}


@dataclass
class _Plan:
    """What `_prepare` decided: the versions planned from, the repairs made, the task bins."""

    roots: Roots
    read_versions: dict[str, int | None]
    repairs: tuple[str, ...]
    job_dirs: int = 0
    plans: list[list[tuple[str, str, list[str], str]]] = field(default_factory=list)


class IndexCheckpoints(StatekeeperJob[IndexResult, IndexOptions]):
    """Builder for one index run. Every option is explicit; `execute()` runs it."""

    JOB = INDEX

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self._plan: _Plan | None = None

    # -- run ------------------------------------------------------------------------------------

    def _prepare(self, ctx: RunContext) -> None:
        roots = Roots(list(self.options.roots))
        roots.check_separate(ctx.warehouse.uri, "warehouse")
        t0 = time.monotonic()
        states = {spec.name: delta_log.load_state(ctx.warehouse, spec.name) for spec in INDEX_TABLES}
        for spec in INDEX_TABLES:
            delta_log.check_compatible(states[spec.name], spec)
        # A run that died between its table commits (or before its audit row) left tables ahead of
        # the last audited run; plan only from that run's state (statekeeper.tables.cut).
        _, repairs = cut.heal(ctx.warehouse, INDEX_TABLES, ctx.run_id)
        if repairs:
            states = {spec.name: delta_log.load_state(ctx.warehouse, spec.name) for spec in INDEX_TABLES}
        read_versions = {name: (None if s is None else s.version) for name, s in states.items()}
        self._plan = plan = _Plan(roots, read_versions, tuple(r.describe() for r in repairs))
        storage_io = GuardedFileIO(RoutingFileIO(ctx.storage), roots)
        buckets = plan_buckets(storage_io, roots, states, self.options.job_filter,
                               allow_empty_root=self.options.allow_empty_root)
        del states  # file lists now live in the bucket plans only
        # One task per core: a bucket is the unit of balance and cannot be split anyway, and each
        # extra task costs its own Python workers' setup. On local[2] (bench index_store) a full
        # run took 2.9 s with 2 tasks, 3.6 s with 4 and 3.8 s with 8.
        tasks = self.options.parallelism or max(1, ctx.spark.sparkContext.defaultParallelism)
        bins = balance(buckets, tasks)
        plan.job_dirs = sum(len(b.plan.job_dirs) for b in buckets)
        # The plans travel inside the task function (a few KB: buckets and their data file
        # lists); each of the `len(bins)` Spark tasks gets one id from a JVM range and indexes
        # that bin, so no Python stage is needed just to hand plans to the tasks.
        plan.plans = [[(b.plan.root.uri, b.plan.bucket, b.plan.job_dirs, encode_previous(b.plan.previous))
                       for b in group] for group in bins]
        ctx.log.info("%s: %d job dirs in %d buckets in %d tasks (previous versions %s), planned in %.1fs",
                     ctx.label, plan.job_dirs, len(buckets), len(bins), read_versions, time.monotonic() - t0)

    def _planned(self) -> _Plan:
        assert self._plan is not None, "_prepare plans the run"
        return self._plan

    def _result_fields(self, ctx: RunContext) -> dict[str, Any]:
        plan = self._planned()
        return {"roots": tuple(plan.roots.uris), "engine": ctx.engine.name, "repairs": plan.repairs}

    def _failed(self, ctx: RunContext, error: str) -> IndexResult:
        # A failed row never names a cut: readers take `succeeded` rows, the next run heals from
        # the last succeeded or partial one. Its versions are those it planned from.
        return self._result(ctx, FAILED, stats=UnitStats(errors=[error]), table_versions=self._planned().read_versions,
                            error=error)

    def _run(self, ctx: RunContext) -> IndexResult:
        plan = self._planned()
        spark, log = ctx.spark, ctx.log
        t0 = time.monotonic()
        accumulators = {name: spark.sparkContext.accumulator(0) for name in
                        ("units", "objects_listed", "metadata_parsed", "metadata_reused")}
        task = IndexTask(plan.roots.uris, ctx.storage, ctx.warehouse, ctx.run_id, accumulators, plan.plans,
                         self.options.job_filter)
        changes = (spark.range(0, len(plan.plans), 1, numPartitions=max(1, len(plan.plans)))
                   .mapInArrow(task, CHANGESET_SCHEMA))
        ctx.beat.phase("indexing and committing", lambda: _progress_line(accumulators, plan.job_dirs,
                                                                          ctx.beat.phase_seconds))
        outcome = ctx.engine.commit_changeset(changes, ctx.warehouse, list(INDEX_TABLES), plan.read_versions,
                                              metadata=ctx.commit_metadata())
        t1 = time.monotonic()
        log.info("%s: indexed and committed in %.1fs", ctx.label, t1 - t0)
        stats = UnitStats()
        task_seconds = []
        for note in outcome.notes:
            if isinstance(note, dict) and note.get("kind") == "index_task":
                stats.add(UnitStats.from_mapping(note), max_errors=_MAX_AUDITED_ERRORS)
                task_seconds.append(float(note.get("seconds", 0.0)))
        log.info("%s: %d tasks, %.1fs in task functions (longest %.1fs)", ctx.label, len(task_seconds),
                 sum(task_seconds), max(task_seconds, default=0.0))
        versions = {name: (outcome.committed[name].version if name in outcome.committed
                           and outcome.committed[name].version is not None else version)
                    for name, version in plan.read_versions.items()}
        for line in stats.errors[:20]:
            log.warning("%s", line)
        return self._result(ctx, SUCCEEDED if stats.units_failed == 0 else PARTIAL, stats=stats,
                            table_versions=versions)

    def _audit_context(self) -> dict[str, Any]:
        opts = self.options
        return {"data_interval_start": opts.data_interval_start, "data_interval_end": opts.data_interval_end,
                "options": json.dumps({"engine": self._engine, "parallelism": opts.parallelism,
                                       "job_filter": opts.job_filter})}


def _progress_line(accumulators: dict[str, Any], total_units: int, seconds: float) -> str:
    """Live counters from the Spark accumulators (updated as tasks finish)."""
    v = {k: a.value for k, a in accumulators.items()}
    elapsed = max(seconds, 1e-9)
    return (f"{v['units']}/{total_units} units, {v['objects_listed']} objects listed "
            f"({v['objects_listed'] / elapsed:.0f}/s), {v['metadata_parsed']} _metadata parsed "
            f"({v['metadata_parsed'] / elapsed:.1f}/s), {v['metadata_reused']} reused")
