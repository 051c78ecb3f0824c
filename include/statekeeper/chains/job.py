"""The chains job: explicit options in, a result object with counts out.

    result = (ComputeChains(spark)
              .warehouse("s3://bucket/statekeeper")
              .storage(StorageConfig.from_env())
              .configure(ChainsOptions(max_depth=64))
              .execute())

One run reads `snapshots`, `references` and `files` at the pinned cut, computes every snapshot's
direct dependencies (the directories whose files it uses) and its transitive lineage in Spark,
overwrites `dependencies` and `pins` (one commit each) and appends a `chains_runs` audit row.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from statekeeper.chains.options import ChainsOptions
from statekeeper.jobs.base import StatekeeperJob
from statekeeper.jobs.context import RunContext
from statekeeper.jobs.result import JobResult
from statekeeper.registry import CHAINS
from statekeeper.tables.catalog import DEPENDENCIES, PINS
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS, ChainsRunStatus, Dependency, SnapshotStatus

SUCCEEDED = ChainsRunStatus.SUCCEEDED
INCOMPLETE = ChainsRunStatus.INCOMPLETE
FAILED = ChainsRunStatus.FAILED


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


class ComputeChains(StatekeeperJob[ChainsResult, ChainsOptions]):
    """Builder for one chains run. Every option is explicit; `execute()` runs it."""

    JOB = CHAINS
    SOURCES = ("snapshots", "references", "files")

    def _run(self, ctx: RunContext) -> ChainsResult:
        from statekeeper.chains.spark_graph import lineage
        from statekeeper.layout.spark_locate import direct_edges, file_uses

        keep, beat, log = ctx.keep, ctx.beat, ctx.log
        tables = self._read_cut(ctx)
        snaps, refs, files = tables["snapshots"], tables["references"], tables["files"]
        clock = time.monotonic()
        total, unparsed, examples = _unparsed(snaps)
        if unparsed:
            log.warning("%s: %d snapshot(s) could not be parsed; their references are unknown (%s)",
                        ctx.label, unparsed, ", ".join(examples))

        beat.phase("direct dependencies")
        direct = keep(direct_edges(file_uses(refs, snaps, files)))
        log.info("%s: direct dependencies computed (%.1fs)", ctx.label, time.monotonic() - clock)
        beat.phase("lineage")
        edges = keep(_edges(direct, lineage(direct, self.options.max_depth), snaps, ctx.run_id))
        log.info("%s: lineage computed (%.1fs)", ctx.label, time.monotonic() - clock)
        stats = _edge_counts(edges)

        metadata = ctx.commit_metadata(**{"statekeeper.sourceVersions": json.dumps(self.inputs.versions,
                                                                                  sort_keys=True)})
        beat.phase("writing dependencies and pins")
        committed = ctx.write_all([(DEPENDENCIES, _dependencies(edges)), (PINS, _pins(edges))], metadata=metadata)
        log.info("%s: tables written (%.1fs)", ctx.label, time.monotonic() - clock)
        return self._result(ctx, INCOMPLETE if unparsed else SUCCEEDED, table_versions=committed, snapshots=total,
                            unparsed_snapshots=unparsed, unparsed_examples=examples, **stats)


def _unparsed(snaps: Any) -> tuple[int, int, tuple[str, ...]]:
    """Snapshots in all, those whose `_metadata` did not parse, and the first few of them."""
    from pyspark.sql import functions as F

    counts = snaps.agg(F.count(F.lit(1)).alias("n"),
                       F.sum(F.when(F.col("status") != SnapshotStatus.OK, 1).otherwise(0)).alias("bad")).first()
    total, unparsed = int(counts["n"] or 0), int(counts["bad"] or 0)
    examples = tuple(r["uri"] for r in snaps.where(F.col("status") != SnapshotStatus.OK).select("uri").orderBy("uri")
                     .limit(5).collect()) if unparsed else ()
    return total, unparsed, examples


def _edges(direct: Any, trans: Any, snaps: Any, run_id: str) -> Any:
    """Direct and transitive edges with the identity of the snapshot they start from."""
    from pyspark.sql import functions as F

    from statekeeper.layout.spark_locate import direct_edges_columns

    info = snaps.select(F.col("uri").alias("snapshot_uri"), F.col("job_id").alias("snapshot_job_id"),
                        F.coalesce("checkpoint_id", "dir_checkpoint_id").alias("snapshot_checkpoint_id"),
                        "snapshot_type")
    return (direct.select(*direct_edges_columns()).unionByName(trans)
            .join(info, "snapshot_uri", "left")
            .withColumn("run_id", F.lit(run_id)))


def _edge_counts(edges: Any) -> dict[str, int]:
    """The Result's counts of the edges: direct, transitive, direct across directories, deepest."""
    from pyspark.sql import functions as F

    direct = F.col("dependency") == Dependency.DIRECT
    stats = edges.agg(
        F.sum(F.when(direct, 1).otherwise(0)).alias("direct"),
        F.sum(F.when(F.col("dependency") == Dependency.TRANSITIVE, 1).otherwise(0)).alias("transitive"),
        F.sum(F.when(direct & F.col("relation").isin(*sorted(FOREIGN_RELATIONS)), 1).otherwise(0)).alias("cross"),
        F.max("depth").alias("depth")).first()
    return {"direct_rows": int(stats["direct"] or 0), "transitive_rows": int(stats["transitive"] or 0),
            "cross_directory_rows": int(stats["cross"] or 0), "max_depth": int(stats["depth"] or 0)}


def _dependencies(edges: Any) -> Any:
    return edges.select(*[c for c in DEPENDENCIES.schema.names if c != "bucket"])  # bucketed() adds it


def _pins(edges: Any) -> Any:
    """The edges by the directory they keep alive."""
    from pyspark.sql import functions as F

    return edges.select(
        F.col("target_root").alias("root"), F.col("target_root_id").alias("root_id"),
        F.col("target_job_dir").alias("job_dir"), "target_kind", "target_uri", "target_snapshot_uri",
        "target_job_id", "snapshot_uri", F.col("root").alias("snapshot_root"),
        F.col("root_id").alias("snapshot_root_id"), F.col("job_dir").alias("snapshot_job_dir"),
        "snapshot_job_id", "snapshot_checkpoint_id", "snapshot_type", "relation", "dependency", "depth", "via",
        "files", "directories", "bytes", "run_id")
