"""The chains job: explicit options in, a result object with counts out.

    result = (ComputeChains(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .execute())

One run reads `snapshots`, `references` and `files` at the pinned cut, computes every snapshot's
direct dependencies (the directories whose files it uses) and its transitive lineage in Spark,
overwrites `dependencies` and `pins` (one commit each) and appends a `chains_runs` audit row.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.inputs import PinnedInputs, check_consistent, pin_inputs
from statekeeper.jobs.registry import CHAINS
from statekeeper.jobs.result import JobResult
from statekeeper.tables.catalog import DEPENDENCIES, PINS
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS, ChainsRunStatus, Dependency, SnapshotStatus

SUCCEEDED = ChainsRunStatus.SUCCEEDED
INCOMPLETE = ChainsRunStatus.INCOMPLETE
FAILED = ChainsRunStatus.FAILED
SOURCES = ("snapshots", "references", "files")


@dataclass(frozen=True, kw_only=True)
class ChainsResult(JobResult):
    source_versions: dict[str, int]
    snapshots: int = 0
    unparsed_snapshots: int = 0
    unparsed_examples: tuple[str, ...] = ()
    direct_rows: int = 0
    transitive_rows: int = 0
    cross_directory_rows: int = 0
    max_depth: int = 0

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


class ComputeChains(StatekeeperJob[ChainsResult]):
    """Builder for one chains run. Every option is explicit; `execute()` runs it."""

    JOB = CHAINS

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self._max_depth = 64
        self._inputs: PinnedInputs | None = None

    def max_depth(self, levels: int) -> ComputeChains:
        """Fail if restore lineage is deeper than this many levels."""
        if levels < 1:
            raise ValueError("max_depth must be >= 1")
        self._max_depth = levels
        return self

    # -- run ------------------------------------------------------------------------------------

    def _prepare(self, ctx: RunContext) -> None:
        self._inputs = pin_inputs(ctx.warehouse, SOURCES)
        ctx.log.info("%s: warehouse %s, engine %s, index versions %s", ctx.label, ctx.warehouse.uri,
                     ctx.engine.name, self._inputs.versions)

    def _failed(self, ctx: RunContext, error: str) -> ChainsResult:
        return ChainsResult(run_id=ctx.run_id, status=FAILED, started_at=ctx.started,
                            finished_at=datetime.now(timezone.utc), warehouse=ctx.warehouse.uri,
                            source_versions=self._pinned().versions, error=error)

    def _pinned(self) -> PinnedInputs:
        assert self._inputs is not None, "_prepare pins the inputs"
        return self._inputs

    def _run(self, ctx: RunContext) -> ChainsResult:
        from pyspark.sql import functions as F

        from statekeeper.chains.spark_graph import lineage
        from statekeeper.layout.spark_locate import direct_edges, direct_edges_columns, file_uses

        keep, beat, log = ctx.keep, ctx.beat, ctx.log
        versions = self._pinned().versions
        tables = self._pinned().read(ctx.spark, ctx.engine, ctx.warehouse)
        snaps, refs, files = tables["snapshots"], tables["references"], tables["files"]
        check_consistent(snaps, refs, versions)
        clock = time.monotonic()

        counts = snaps.agg(F.count(F.lit(1)).alias("n"),
                           F.sum(F.when(F.col("status") != SnapshotStatus.OK, 1).otherwise(0)).alias("bad")).first()
        total, unparsed = int(counts["n"] or 0), int(counts["bad"] or 0)
        examples = tuple(r["uri"] for r in snaps.where(F.col("status") != SnapshotStatus.OK).select("uri").orderBy("uri")
                         .limit(5).collect()) if unparsed else ()
        if unparsed:
            log.warning("%s: %d snapshot(s) could not be parsed; their references are unknown (%s)",
                        ctx.label, unparsed, ", ".join(examples))

        beat.phase("direct dependencies")
        direct = keep(direct_edges(file_uses(refs, snaps, files)))
        log.info("%s: direct dependencies computed (%.1fs)", ctx.label, time.monotonic() - clock)
        beat.phase("lineage")
        trans = keep(lineage(direct, keep, self._max_depth))
        log.info("%s: lineage computed (%.1fs)", ctx.label, time.monotonic() - clock)

        info = snaps.select(F.col("uri").alias("snapshot_uri"), F.col("job_id").alias("snapshot_job_id"),
                            F.coalesce("checkpoint_id", "dir_checkpoint_id").alias("snapshot_checkpoint_id"),
                            "snapshot_type")
        edges = keep(direct.select(*direct_edges_columns()).unionByName(trans)
                     .join(info, "snapshot_uri", "left")
                     .withColumn("run_id", F.lit(ctx.run_id)))
        stats = edges.agg(
            F.sum(F.when(F.col("dependency") == Dependency.DIRECT, 1).otherwise(0)).alias("direct"),
            F.sum(F.when(F.col("dependency") == Dependency.TRANSITIVE, 1).otherwise(0)).alias("transitive"),
            F.sum(F.when((F.col("dependency") == Dependency.DIRECT) & F.col("relation").isin(*sorted(FOREIGN_RELATIONS)), 1)
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
        metadata = ctx.commit_metadata(**{"statekeeper.sourceVersions": json.dumps(versions, sort_keys=True)})
        beat.phase("writing dependencies and pins")
        committed = ctx.write_all([(DEPENDENCIES, deps), (PINS, pins)], metadata=metadata)
        log.info("%s: tables written (%.1fs)", ctx.label, time.monotonic() - clock)
        return ChainsResult(
            run_id=ctx.run_id, status=INCOMPLETE if unparsed else SUCCEEDED, started_at=ctx.started,
            finished_at=datetime.now(timezone.utc), warehouse=ctx.warehouse.uri, table_versions=committed,
            source_versions=versions, snapshots=total, unparsed_snapshots=unparsed, unparsed_examples=examples,
            direct_rows=int(stats["direct"] or 0), transitive_rows=int(stats["transitive"] or 0),
            cross_directory_rows=int(stats["cross"] or 0), max_depth=int(stats["depth"] or 0))
