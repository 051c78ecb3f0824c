"""What one run of a job works with: Spark, the table engine, the warehouse, its id, its
progress heartbeat and the DataFrames it keeps computed. Built by `StatekeeperJob.execute()`."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from statekeeper.jobs.progress import Heartbeat
from statekeeper.jobs.side_by_side import run_part
from statekeeper.storage import StorageConfig
from statekeeper.tables.delta_log import CommitResult
from statekeeper.tables.delta_spark import DeltaSparkEngine as TableEngine, WriteMode
from statekeeper.tables.spark import release_checkpoint
from statekeeper.tables.spec import TableSpec
from statekeeper.tables.warehouse import Warehouse


class Materialized:
    """Computes DataFrames a job reuses once, now, and cuts their lineage; frees them on exit.

    A local checkpoint, not a cache: a cached frame keeps its whole plan, and every frame built on
    it (and on frames built on those) plans, optimizes and describes that plan again. Spark writes a
    plan description for every SQL execution and every adaptive re-plan, and a cached relation's
    description includes the plan it caches: a DR copy round, whose frames nest six deep, spent
    more than half its time building plan strings (32 s of a run against 12 s checkpointed, on the
    sample store). A checkpointed frame is a leaf: its rows, its schema, nothing above.

    What a checkpoint gives up: Spark cannot recompute lost blocks (a lost executor fails the run
    instead of re-running its tasks), which is what the frames kept here want anyway: the copy,
    verify and `_metadata` tasks must not run twice. (Caching replaced checkpoints once because
    Spark 4.2 previews failed to plan a union of two checkpointed frames, "key not found" in
    UnionBase.rewriteConstraints; the chains job's union of its direct and transitive edges plans
    on 4.2.0, tests/chains.)
    """

    def __init__(self) -> None:
        self._frames: list[Any] = []

    def __call__(self, df: Any) -> Any:
        df = df.localCheckpoint(eager=True)
        self._frames.append(df)
        return df

    def __enter__(self) -> Materialized:
        return self

    def __exit__(self, *exc: object) -> None:
        for df in reversed(self._frames):
            release_checkpoint(df)
        self._frames.clear()


class Deferred:
    """Checks a run starts beside its own first queries, each in a thread of its own, that must have passed
    before the run commits anything (`settle`): a check that is a Spark query of its own otherwise runs
    alone, first, while the second core waits (the cut check: a grouped count of `references` joined to the
    snapshots, about a second of a small run as the first query of a fresh JVM)."""

    def __init__(self) -> None:
        self._futures: list[Any] = []

    def start(self, spark: Any, beat: Heartbeat, name: str, check: Callable[[], None]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekeeper-check")
        self._futures.append(pool.submit(run_part, spark, beat, name, check))
        pool.shutdown(wait=False)

    def settle(self, cause: BaseException | None = None) -> None:
        """Wait for every check started; raise the first one's error (from `cause`, the run's own error, when
        the run failed first: a torn cut explains the rest)."""
        futures, self._futures = self._futures, []
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        if errors:
            raise errors[0] from cause


@dataclass
class RunContext:
    spark: Any
    engine: TableEngine
    warehouse: Warehouse
    storage: StorageConfig
    run_id: str
    started: datetime
    operation: str                 # the job's registry name, recorded in every commit it makes
    noun: str                      # how logs name the job's runs ("validation")
    log: logging.Logger
    beat: Heartbeat
    keep: Materialized = field(default_factory=Materialized)
    deferred: Deferred = field(default_factory=Deferred)

    @property
    def label(self) -> str:
        return f"{self.noun} run {self.run_id}"

    def commit_metadata(self, **extra: str) -> dict[str, str]:
        """Delta commit metadata naming this run (and e.g. the source versions it read)."""
        return {"statekeeper.runId": self.run_id, "statekeeper.operation": self.operation, **extra}

    def write(self, df: Any, spec: TableSpec, *, mode: WriteMode = "overwrite",
              metadata: dict[str, str] | None = None) -> CommitResult:
        """Write a derived table in one commit, bucketed like the index tables when partitioned (once the
        run's deferred checks have passed)."""
        from statekeeper.tables.spark import bucketed

        self.deferred.settle()
        return self.engine.write(bucketed(df, spec), self.warehouse, spec, mode=mode,
                                 metadata=metadata if metadata is not None else self.commit_metadata())

    def write_all(self, frames: list[tuple[TableSpec, Any]], *,
                  metadata: dict[str, str] | None = None) -> dict[str, int]:
        """Overwrite several derived tables, one commit each, the writes running side by side: each
        write is mostly round trips to Python workers (plan, commit) and small tasks, so one table's
        round trips overlap the other's tasks. A failure is raised after every write has ended (a
        table that committed stays committed, as when written one after the other; the run's audit
        row says it failed). Returns each table's new version."""
        from concurrent.futures import ThreadPoolExecutor

        from statekeeper.launch.session import activate

        def one(item: tuple[TableSpec, Any]) -> int:
            spec, df = item
            activate(self.spark)  # a new thread has no active session on the JVM side
            self.beat.name_jobs(f"writing {spec.name}")
            return self.write(df, spec, metadata=metadata).version

        self.deferred.settle()   # here, not in each writer's thread: no table commits before the checks pass
        if len(frames) == 1:
            return {frames[0][0].name: one(frames[0])}
        with ThreadPoolExecutor(max_workers=len(frames), thread_name_prefix=f"{self.operation}-write") as pool:
            futures = [(spec.name, pool.submit(one, (spec, df))) for spec, df in frames]
            errors = [f.exception() for _, f in futures]
        for error in errors:
            if error is not None:
                raise error
        return {name: f.result() for name, f in futures}

