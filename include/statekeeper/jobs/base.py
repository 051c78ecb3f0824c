"""The builder every Statekeeper job is: its options dataclass, `execute()`, a Result.

    result = (CompactCheckpoints(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .configure(CompactOptions(max_metadata_size=64 << 20))
              .execute())

Modelled on Iceberg's `BaseSparkAction`: the base owns what every job does the same way — the
common settings (warehouse, storage, engine, run ids, progress), the job's options (one frozen
dataclass per job, given with `configure`; its defaults are the safe ones), resolving the warehouse
and engine, pinning the index cut the job reads (`SOURCES`) and the reads derived from it, the
progress heartbeat (which also names each phase in the Spark UI), the DataFrames kept computed for
the run, the Result every outcome is spelled in, writing the audit row from it, and the failure
path: a run that fails after it started is recorded as `failed` in its audit table and the error is
re-raised. A job supplies `_prepare` (check its inputs; errors there are configuration errors and
leave no audit row), `_run`, and the fields its Results share (`_result_fields`).
"""
from __future__ import annotations

import dataclasses
import logging
import uuid
from datetime import datetime, timezone
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from statekeeper import __version__
from statekeeper.jobs.inputs import PinnedInputs, check_consistent, pin_inputs
from statekeeper.jobs.result import JobResult
from statekeeper.jobs.side_by_side import run_side_by_side
from statekeeper.registry import JobSpec
from statekeeper.storage import StorageConfig
from statekeeper.tables.errors import TableError
from statekeeper.tables.warehouse import Warehouse

R = TypeVar("R", bound=JobResult)
O = TypeVar("O")
Self = TypeVar("Self", bound="StatekeeperJob[Any, Any]")


class StatekeeperJob(Generic[R, O]):
    """Base builder. A job subclasses `StatekeeperJob[ItsResult, ItsOptions]` (the two types become
    RESULT and OPTIONS), sets JOB (its registry entry), and SOURCES when it reads the index."""

    JOB: ClassVar[JobSpec]
    RESULT: ClassVar[type]
    OPTIONS: ClassVar[type]
    # Index tables the job reads at the newest succeeded cut (none: it pins nothing), and optional
    # tables: index tables from the same cut, derived tables at their latest version when present.
    SOURCES: ClassVar[tuple[str, ...]] = ()
    OPTIONAL_SOURCES: ClassVar[tuple[str, ...]] = ()
    FAILED: ClassVar[str] = "failed"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is StatekeeperJob:
                cls.RESULT, cls.OPTIONS = get_args(base)

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._warehouse: str | Warehouse | None = None
        self._storage: StorageConfig | None = None
        self._engine = "auto"
        self._run_id: str | None = None
        self._airflow_run_id: str | None = None
        self._progress_interval = 10.0
        self._options: O = self.OPTIONS()
        self._inputs: PinnedInputs | None = None
        # What a run has done so far, recorded in its row if it fails later (counts, versions written).
        self._progress: dict[str, Any] = {}
        self.log = logging.getLogger(self.JOB.logger)

    # -- settings every job takes ----------------------------------------------------------------

    def warehouse(self: Self, location: str | Warehouse) -> Self:
        """Where the Delta tables live: a local path or an s3:// prefix."""
        self._warehouse = location
        return self

    def storage(self: Self, config: StorageConfig) -> Self:
        """Storage settings (default: from the environment)."""
        self._storage = config
        return self

    def engine(self: Self, name: str) -> Self:
        """Table engine: delta-spark, the only one (`auto` names it too)."""
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

    # -- the job's own options -------------------------------------------------------------------

    def configure(self: Self, options: O) -> Self:
        """The job's options (its OPTIONS dataclass), all at once; checked when the run starts."""
        if not isinstance(options, self.OPTIONS):
            raise TypeError(f"{type(self).__name__} takes {self.OPTIONS.__name__}, not {type(options).__name__}")
        self._options = options
        return self

    @property
    def options(self) -> O:
        return self._options

    @property
    def inputs(self) -> PinnedInputs:
        """The versions this run reads (pinned before `_prepare`)."""
        assert self._inputs is not None, f"{type(self).__name__} pins no inputs (SOURCES is empty)"
        return self._inputs

    # -- the run ---------------------------------------------------------------------------------

    def execute(self) -> R:
        from statekeeper.launch.codegen import fit_codegen
        from statekeeper.jobs.context import RunContext
        from statekeeper.jobs.progress import Heartbeat
        from statekeeper.tables.engine import select_engine
        from statekeeper.launch.session import activate

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
        beat = Heartbeat(self._spark, self.log, f"{self.JOB.label} run {run_id}", self._progress_interval,
                         job_tag=f"statekeeper-{run_id}")
        ctx = RunContext(self._spark, engine, warehouse, storage, run_id, started, self.JOB.name, self.JOB.label,
                         self.log, beat)
        self._progress = {}
        if self.SOURCES:
            self._inputs = pin_inputs(warehouse, self.SOURCES, self.OPTIONAL_SOURCES)
        objects = self._inputs.cut.objects if self._inputs is not None else None
        if fit_codegen(self._spark, objects):
            self.log.info("%s: Spark's driver-side code interpreted, not compiled: a store of %d objects",
                          ctx.label, objects)
        self._prepare(ctx)
        self.log.info("%s: warehouse %s, engine %s%s, %s", ctx.label, warehouse.uri, engine.name, self._read_line(),
                      self._options)
        try:
            # The heartbeat stops once the run's Spark jobs have ended, before the kept frames are released.
            with ctx.keep, beat:
                try:
                    result = self._run(ctx)
                except BaseException as exc:
                    ctx.deferred.settle(cause=exc)
                    raise
                ctx.deferred.settle()
        except BaseException as exc:
            self._audit(ctx, self._failed(ctx, f"{type(exc).__name__}: {exc}"))
            raise
        self._audit(ctx, result)
        self.log.info("%s", result.summary())
        return result

    def _read_line(self) -> str:
        """What the run reads, as its first log line names it."""
        if self._inputs is None:
            return ""
        line = f", index run {self._inputs.cut.run_id} of roots {self._inputs.roots} at versions {self._inputs.versions}"
        return line + (f", derived tables at versions {self._inputs.optional}" if self.OPTIONAL_SOURCES else "")

    def _check_options(self) -> None:
        """Refuse contradictory or missing options before anything starts (a ConfigurationError)."""
        self._options.check()

    def _prepare(self, ctx: Any) -> None:
        """Check the inputs. Errors here leave no audit row."""

    def _run(self, ctx: Any) -> R:
        raise NotImplementedError

    # -- what every job reads --------------------------------------------------------------------

    def _read_cut(self, ctx: Any, *, keep: tuple[str, ...] = ()) -> dict[str, Any]:
        """DataFrames of the SOURCES at their pinned versions (those in `keep` computed once and kept),
        refused unless they are a consistent cut (statekeeper.jobs.inputs.check_consistent): checked beside
        the kept frames' computation, or with none kept, beside the job's first queries and before any of
        its commits (a job that acts on storage passes `keep`, or settles `ctx.deferred` before it first acts,
        so that it acts on a checked cut only)."""
        frames = self.inputs.read(ctx.spark, ctx.engine, ctx.warehouse)

        def check() -> None:   # on the frames as read: the kept ones are being computed beside it
            check_consistent(frames["snapshots"], frames["references"], self.inputs.versions)

        if not keep:
            # Nothing to compute beside it here: it runs beside the job's own first queries instead, and the
            # job commits nothing before it has passed (RunContext.deferred).
            ctx.deferred.start(ctx.spark, ctx.beat, "checking the cut", check)
            return frames
        parts = {f"reading {name}": (lambda df=df: ctx.keep(df)) for name, df in frames.items() if name in keep}
        kept = run_side_by_side(ctx.spark, ctx.beat, {"checking the cut": check, **parts})
        return {name: kept.get(f"reading {name}", df) for name, df in frames.items()}

    # -- the Result ------------------------------------------------------------------------------

    def _result(self, ctx: Any, status: str, **values: Any) -> R:
        """The run's Result: what the base knows (ids, times, the versions read), the job's own
        fields (`_result_fields`), then `values`."""
        fields: dict[str, Any] = {"run_id": ctx.run_id, "status": _plain(status), "started_at": ctx.started,
                                  "finished_at": datetime.now(timezone.utc), "warehouse": ctx.warehouse.uri}
        if self._inputs is not None and "source_versions" in {f.name for f in dataclasses.fields(self.RESULT)}:
            fields["source_versions"] = self._inputs.versions
        return self.RESULT(**{**fields, **self._result_fields(ctx), **values})

    def _result_fields(self, ctx: Any) -> dict[str, Any]:
        """Fields every Result of this job carries (its mode, its options as recorded, its roots)."""
        return {}

    def _failed(self, ctx: Any, error: str) -> R:
        """The Result recorded when `_run` raised: what the run had done so far, and the error."""
        return self._result(ctx, self.FAILED, **{**self._progress, "error": error})

    # -- the audit row ---------------------------------------------------------------------------

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


def _plain(status: str) -> str:
    """A status as its audit column holds it (the value of a vocabulary enum)."""
    return status.value if isinstance(status, Enum) else status
