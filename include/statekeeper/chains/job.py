"""The chains job: explicit options in, a result object with counts out.

    result = (ComputeChains(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .execute())

One run reads `snapshots`, `references` and `files` at pinned versions, computes every snapshot's
direct dependencies (the directories whose files it uses) and its transitive lineage in Spark,
overwrites `dependencies` and `pins` (one commit each) and appends a `chains_runs` audit row.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from statekeeper import __version__
from statekeeper.chains.locate import FOREIGN_RELATIONS
from statekeeper.chains.sources import check_consistent, pin_versions, read_pinned
from statekeeper.chains.tables import CHAINS_RUNS, DEPENDENCIES, DIRECT, PINS, TRANSITIVE
from statekeeper.storage import StorageConfig
from statekeeper.tables.errors import TableError
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger("statekeeper.chains")

SUCCEEDED = "succeeded"
INCOMPLETE = "incomplete"   # some `_metadata` could not be parsed: their references are unknown
FAILED = "failed"
SOURCES = ("snapshots", "references", "files")


@dataclass(frozen=True)
class ChainsResult:
    run_id: str
    status: str
    started_at: datetime
    finished_at: datetime
    warehouse: str
    source_versions: dict[str, int]
    table_versions: dict[str, int | None] = field(default_factory=dict)
    snapshots: int = 0
    unparsed_snapshots: int = 0
    unparsed_examples: tuple[str, ...] = ()
    direct_rows: int = 0
    transitive_rows: int = 0
    cross_directory_rows: int = 0
    max_depth: int = 0
    error: str | None = None

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def summary(self) -> str:
        text = (f"chains run {self.run_id} {self.status} in {self.seconds:.1f}s: {self.snapshots} snapshots, "
                f"{self.direct_rows} direct dependencies ({self.cross_directory_rows} cross-directory), "
                f"{self.transitive_rows} transitive (max depth {self.max_depth}); index versions "
                f"{self.source_versions}, table versions {self.table_versions}")
        if self.unparsed_snapshots:
            text += (f"; INCOMPLETE: {self.unparsed_snapshots} snapshot(s) could not be parsed and may reference "
                     f"files the graph does not show, e.g. {', '.join(self.unparsed_examples)}")
        if self.error:
            text += f"; error: {self.error}"
        return text

    def to_mapping(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat(), "seconds": round(self.seconds, 3),
                "warehouse": self.warehouse, "source_versions": self.source_versions,
                "table_versions": self.table_versions, "snapshots": self.snapshots,
                "unparsed_snapshots": self.unparsed_snapshots, "unparsed_examples": list(self.unparsed_examples),
                "direct_rows": self.direct_rows, "transitive_rows": self.transitive_rows,
                "cross_directory_rows": self.cross_directory_rows, "max_depth": self.max_depth,
                "error": self.error}


class ComputeChains:
    """Builder for one chains run. Every option is explicit; `execute()` runs it."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._warehouse: str | Warehouse | None = None
        self._storage: StorageConfig | None = None
        self._engine = "auto"
        self._run_id: str | None = None
        self._airflow_run_id: str | None = None
        self._max_depth = 64
        self._progress_interval = 10.0

    def warehouse(self, location: str | Warehouse) -> ComputeChains:
        self._warehouse = location
        return self

    def storage(self, config: StorageConfig) -> ComputeChains:
        self._storage = config
        return self

    def engine(self, name: str) -> ComputeChains:
        self._engine = name
        return self

    def run_id(self, run_id: str) -> ComputeChains:
        self._run_id = run_id
        return self

    def airflow_run(self, run_id: str | None) -> ComputeChains:
        self._airflow_run_id = run_id or None
        return self

    def max_depth(self, levels: int) -> ComputeChains:
        if levels < 1:
            raise ValueError("max_depth must be >= 1")
        self._max_depth = levels
        return self

    def progress_interval(self, seconds: float) -> ComputeChains:
        """Seconds between progress log lines (0 turns them off)."""
        self._progress_interval = seconds
        return self

    # -- run ------------------------------------------------------------------------------------

    def execute(self) -> ChainsResult:
        from statekeeper.tables.engine import select_engine
        from statekeeper.tables.spark import activate

        if self._warehouse is None:
            raise ValueError("no warehouse given")
        storage = self._storage if self._storage is not None else StorageConfig.from_env()
        warehouse = (self._warehouse if isinstance(self._warehouse, Warehouse)
                     else Warehouse(self._warehouse, storage))
        run_id = self._run_id or f"chn-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        started = datetime.now(timezone.utc)
        spark = self._spark
        activate(spark)
        engine = select_engine(spark, self._engine)
        versions = pin_versions(warehouse, SOURCES)
        log.info("chains run %s: warehouse %s, engine %s, index versions %s", run_id, warehouse.uri, engine.name,
                 versions)
        try:
            result = self._run(engine, warehouse, run_id, started, versions)
        except BaseException as exc:
            failed = ChainsResult(run_id, FAILED, started, datetime.now(timezone.utc), warehouse.uri, versions,
                                  error=f"{type(exc).__name__}: {exc}")
            self._audit(engine, warehouse, failed)
            raise
        self._audit(engine, warehouse, result)
        log.info("%s", result.summary())
        return result

    def _run(self, engine: Any, warehouse: Warehouse, run_id: str, started: datetime,
             versions: dict[str, int]) -> ChainsResult:
        from statekeeper.chains.progress import Heartbeat
        from statekeeper.chains.spark_graph import Materialized

        with Materialized() as keep, Heartbeat(self._spark, log, f"chains run {run_id}",
                                               self._progress_interval) as beat:
            return self._compute(engine, warehouse, run_id, started, versions, keep, beat)

    def _compute(self, engine: Any, warehouse: Warehouse, run_id: str, started: datetime,
                 versions: dict[str, int], keep: Any, beat: Any) -> ChainsResult:
        from pyspark.sql import functions as F

        from statekeeper.chains.spark_graph import direct_edges, direct_edges_columns, file_uses, lineage

        spark = self._spark
        tables = read_pinned(spark, engine, warehouse, versions)
        snaps, refs, files = tables["snapshots"], tables["references"], tables["files"]
        check_consistent(snaps, refs, versions)
        clock = time.monotonic()

        counts = snaps.agg(F.count(F.lit(1)).alias("n"),
                           F.sum(F.when(F.col("status") != "ok", 1).otherwise(0)).alias("bad")).first()
        total, unparsed = int(counts["n"] or 0), int(counts["bad"] or 0)
        examples = tuple(r["uri"] for r in snaps.where(F.col("status") != "ok").select("uri").orderBy("uri")
                         .limit(5).collect()) if unparsed else ()
        if unparsed:
            log.warning("chains run %s: %d snapshot(s) could not be parsed; their references are unknown (%s)",
                        run_id, unparsed, ", ".join(examples))

        beat.phase("direct dependencies")
        direct = keep(direct_edges(file_uses(refs, snaps, files)))
        log.info("chains run %s: direct dependencies computed (%.1fs)", run_id, time.monotonic() - clock)
        beat.phase("lineage")
        trans = keep(lineage(direct, keep, self._max_depth))
        log.info("chains run %s: lineage computed (%.1fs)", run_id, time.monotonic() - clock)

        info = snaps.select(F.col("uri").alias("snapshot_uri"), F.col("job_id").alias("snapshot_job_id"),
                            F.coalesce("checkpoint_id", "dir_checkpoint_id").alias("snapshot_checkpoint_id"),
                            "snapshot_type")
        edges = keep(direct.select(*direct_edges_columns()).unionByName(trans)
                     .join(info, "snapshot_uri", "left")
                     .withColumn("run_id", F.lit(run_id)))
        stats = edges.agg(
            F.sum(F.when(F.col("dependency") == DIRECT, 1).otherwise(0)).alias("direct"),
            F.sum(F.when(F.col("dependency") == TRANSITIVE, 1).otherwise(0)).alias("transitive"),
            F.sum(F.when((F.col("dependency") == DIRECT) & F.col("relation").isin(*sorted(FOREIGN_RELATIONS)), 1)
                  .otherwise(0)).alias("cross"),
            F.max("depth").alias("depth")).first()

        deps = edges.select(*[c for c in DEPENDENCIES.schema.names if c != "bucket"])  # bucketed() adds it
        pins = edges.select(
            F.col("target_root").alias("root"), F.col("target_root_id").alias("root_id"),
            F.col("target_job_dir").alias("job_dir"), "target_kind", "target_uri", "target_snapshot_uri",
            "target_job_id", "snapshot_uri", F.col("root").alias("snapshot_root"),
            F.col("root_id").alias("snapshot_root_id"), F.col("job_dir").alias("snapshot_job_dir"),
            "snapshot_job_id", "snapshot_checkpoint_id", "snapshot_type", "relation", "dependency", "depth", "via",
            "files", "directories", "bytes", "run_id")
        metadata = {"statekeeper.runId": run_id, "statekeeper.operation": "chains",
                    "statekeeper.sourceVersions": json.dumps(versions, sort_keys=True)}
        committed: dict[str, int | None] = {}
        from statekeeper.tables.spark import bucketed

        beat.phase("writing dependencies and pins")
        for spec, df in ((DEPENDENCIES, deps), (PINS, pins)):
            outcome = engine.write(bucketed(df, spec), warehouse, spec, mode="overwrite",
                                   metadata=metadata)
            committed[spec.name] = outcome.version
        log.info("chains run %s: tables written (%.1fs)", run_id, time.monotonic() - clock)
        return ChainsResult(
            run_id, INCOMPLETE if unparsed else SUCCEEDED, started, datetime.now(timezone.utc), warehouse.uri,
            versions, committed, total, unparsed, examples, int(stats["direct"] or 0), int(stats["transitive"] or 0),
            int(stats["cross"] or 0), int(stats["depth"] or 0))

    def _audit(self, engine: Any, warehouse: Warehouse, result: ChainsResult) -> None:
        import pyarrow as pa

        row = {
            "run_id": result.run_id, "status": result.status, "started_at": result.started_at,
            "finished_at": result.finished_at, "warehouse": result.warehouse, "statekeeper_version": __version__,
            "source_versions": list(result.source_versions.items()),
            "table_versions": [(k, v) for k, v in result.table_versions.items() if v is not None],
            "snapshots": result.snapshots, "unparsed_snapshots": result.unparsed_snapshots,
            "unparsed_examples": list(result.unparsed_examples), "direct_rows": result.direct_rows,
            "transitive_rows": result.transitive_rows, "cross_directory_rows": result.cross_directory_rows,
            "max_depth": result.max_depth, "airflow_run_id": self._airflow_run_id, "error": result.error,
        }
        df = self._spark.createDataFrame(pa.Table.from_pylist([row], schema=CHAINS_RUNS.schema))
        try:
            engine.write(df, warehouse, CHAINS_RUNS, mode="append", metadata={"statekeeper.runId": result.run_id})
        except TableError:
            if result.status != FAILED:
                raise
            log.exception("could not record the failed run %s in chains_runs", result.run_id)
