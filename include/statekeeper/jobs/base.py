"""The builder every Statekeeper job is: explicit options with safe defaults, `execute()`, a Result.

    result = (ComputeChains(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .execute())

Modelled on Iceberg's `BaseSparkAction`: the base owns what every job does the same way — the
common options, resolving the warehouse and engine, the run id, the progress heartbeat (which also
names each phase in the Spark UI), the DataFrames kept computed for the run, writing the audit row
from the Result, and the failure path: a run that fails after it started is recorded as `failed`
in its audit table and the error is re-raised. A job supplies `_prepare` (validate inputs and pin
what it reads; errors there are configuration errors and leave no audit row), `_run` and `_failed`.
"""
from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from typing import Any, ClassVar, Generic, TypeVar

from statekeeper import __version__
from statekeeper.jobs.registry import JobSpec
from statekeeper.jobs.result import JobResult
from statekeeper.storage import StorageConfig
from statekeeper.tables.errors import TableError
from statekeeper.tables.warehouse import Warehouse

R = TypeVar("R", bound=JobResult)
Self = TypeVar("Self", bound="StatekeeperJob[Any]")


class StatekeeperJob(Generic[R]):
    """Base builder. Subclasses set JOB (their registry entry) and AUDIT (their audit table spec)."""

    JOB: ClassVar[JobSpec]
    FAILED: ClassVar[str] = "failed"

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._warehouse: str | Warehouse | None = None
        self._storage: StorageConfig | None = None
        self._engine = "auto"
        self._run_id: str | None = None
        self._airflow_run_id: str | None = None
        self._progress_interval = 10.0
        self.log = logging.getLogger(self.JOB.logger)

    # -- options every job takes ---------------------------------------------------------------

    def warehouse(self: Self, location: str | Warehouse) -> Self:
        """Where the Delta tables live: a local path or an s3:// prefix."""
        self._warehouse = location
        return self

    def storage(self: Self, config: StorageConfig) -> Self:
        """Storage settings (default: from the environment)."""
        self._storage = config
        return self

    def engine(self: Self, name: str) -> Self:
        """Table engine: auto (delta-spark when configured, else delta-rs), delta-rs or delta-spark."""
        self._engine = name
        return self

    def run_id(self: Self, run_id: str) -> Self:
        self._run_id = run_id
        return self

    def airflow_run(self: Self, run_id: str | None) -> Self:
        """The caller's run id, recorded in the audit row."""
        self._airflow_run_id = run_id or None
        return self

    def progress_interval(self: Self, seconds: float) -> Self:
        """Seconds between progress log lines (0 turns them off)."""
        self._progress_interval = seconds
        return self

    # -- the run ---------------------------------------------------------------------------------

    def execute(self) -> R:
        from statekeeper.jobs.context import RunContext
        from statekeeper.jobs.progress import Heartbeat
        from statekeeper.tables.engine import select_engine
        from statekeeper.tables.spark import activate

        if self._warehouse is None:
            raise ValueError("no warehouse given")
        self._check_options()
        storage = self._storage if self._storage is not None else StorageConfig.from_env()
        warehouse = (self._warehouse if isinstance(self._warehouse, Warehouse)
                     else Warehouse(self._warehouse, storage))
        run_id = self._run_id or (f"{self.JOB.run_id_prefix}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-"
                                  f"{uuid.uuid4().hex[:8]}")
        started = datetime.now(timezone.utc)
        activate(self._spark)
        engine = select_engine(self._spark, self._engine)
        beat = Heartbeat(self._spark, self.log, f"{self.JOB.label} run {run_id}", self._progress_interval)
        ctx = RunContext(self._spark, engine, warehouse, storage, run_id, started, self.JOB.name, self.JOB.label,
                         self.log, beat)
        self._prepare(ctx)
        try:
            with ctx.keep, beat:
                result = self._run(ctx)
        except BaseException as exc:
            self._audit(ctx, self._failed(ctx, f"{type(exc).__name__}: {exc}"))
            raise
        self._audit(ctx, result)
        self.log.info("%s", result.summary())
        return result

    def _check_options(self) -> None:
        """Refuse contradictory or missing options before anything starts (ValueError)."""

    def _prepare(self, ctx: Any) -> None:
        """Check the inputs and pin what the run reads. Errors here leave no audit row."""

    def _run(self, ctx: Any) -> R:
        raise NotImplementedError

    def _failed(self, ctx: Any, error: str) -> R:
        """The Result recorded when `_run` raised."""
        raise NotImplementedError

    def _audit_context(self) -> dict[str, Any]:
        """Audit columns that come from the options rather than the Result."""
        return {}

    def _audit(self, ctx: Any, result: R) -> None:
        """Append the run's row to the job's audit table (plain append: audit rows never conflict).
        A failed run whose row cannot be written is logged, and its own error is what propagates."""
        from statekeeper.tables.catalog import spec

        audit = spec(self.JOB.audit_table)
        row = result.audit_row(audit, {"statekeeper_version": __version__, "airflow_run_id": self._airflow_run_id,
                                       **self._audit_context()})
        try:
            ctx.engine.append_rows(ctx.spark, ctx.warehouse, audit, row,
                                   metadata={"statekeeper.runId": result.run_id})
        except TableError:
            if result.status != self.FAILED:
                raise
            self.log.exception("could not record the failed run %s in %s", result.run_id, audit.name)
