"""Lineage as Spark DataFrame transformations (no driver collects).

    uses    = file_uses(references, snapshots, files)   statekeeper.layout.spark_locate
    direct  = direct_edges(uses)                        statekeeper.layout.spark_locate
    trans   = lineage(direct)                           transitive rows, same columns as direct

Lineage runs statekeeper.chains.graph over the small graph of target directories in one task and
joins the result back to snapshots here.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statekeeper.chains.errors import ChainDepthError
from statekeeper.layout.locate import relate_batches
from statekeeper.layout.spark_locate import SNAPSHOT_KEYS, TARGET_ATTRS, direct_edges_columns
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS, Dependency

def _F() -> Any:
    from pyspark.sql import functions as F

    return F


@dataclass
class ClosureTask:
    """mapInArrow over the whole target graph in ONE task: (x, t) edges -> (x, t, depth, via).

    The target graph has one node per directory that some snapshot depends on (job directories,
    savepoints, snapshot directories), not per file or snapshot, so it fits one task; running the
    pure `graph.node_closure` there keeps a single definition of lineage and costs one Spark stage
    instead of a join round per level. Nothing is collected to the driver.
    """

    max_depth: int

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.chains.graph import node_closure

        adjacency: dict[str, set[str]] = {}
        for batch in batches:
            for x, t in zip(batch.column("x").to_pylist(), batch.column("t").to_pylist(), strict=True):
                adjacency.setdefault(x, set()).add(t)
        if not adjacency:
            return
        try:
            closure = node_closure(adjacency, self.max_depth)
        except RecursionError:
            raise ChainDepthError(
                f"lineage between directories is deeper than {self.max_depth} levels; raise max_depth if chains "
                "of restores really are that long") from None
        items = sorted(closure.items())
        for offset in range(0, len(items), 50_000):
            chunk = items[offset:offset + 50_000]
            yield pa.RecordBatch.from_arrays(
                [pa.array([k[0] for k, _ in chunk], pa.string()), pa.array([k[1] for k, _ in chunk], pa.string()),
                 pa.array([v[0] for _, v in chunk], pa.int32()),
                 pa.array([list(v[1]) for _, v in chunk], pa.list_(pa.string()))],
                names=["x", "t", "depth", "via"])


def node_closure(foreign: Any, max_depth: int = 64) -> Any:
    """(x, t, depth, via): target t reachable from target x through the cross-directory dependencies
    (`foreign`: direct edges of a FOREIGN_RELATIONS relation) of x's member snapshots
    (statekeeper.chains.graph.node_closure, run in one Spark task)."""
    F = _F()
    # Lineage is only ever asked from a target and only expands through targets: keep the edges
    # leaving directories that something depends on.
    targets = foreign.select(F.col("target_uri").alias("x")).distinct()
    edges = (foreign.select(
        F.explode(F.array_distinct(F.array("snapshot_dir", "snapshot_job_location"))).alias("x"),
        F.col("target_uri").alias("t")).where(F.col("x") != F.col("t"))
        .join(targets, "x", "left_semi").distinct())
    return edges.repartition(1).mapInArrow(ClosureTask(max_depth),
                                           "x string, t string, depth int, via array<string>")


def lineage(direct: Any, max_depth: int = 64) -> Any:
    """Transitive dependency rows (dependency 'transitive', depth >= 2) with direct_edges' columns;
    files/directories/bytes are null: the snapshot uses none of those files itself.

    Lazy: nothing here runs a Spark job. `direct` should be computed already (the plan reads it four
    times); the closure's one task runs once, when the caller materializes the result, and a graph
    with no cross-directory edge gives an empty closure, so no rows, at the cost of that one task.
    """
    F = _F()
    foreign = direct.where(F.col("relation").isin(*sorted(FOREIGN_RELATIONS)))
    closure = node_closure(foreign, max_depth)
    first = foreign.select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", F.col("target_uri").alias("t1"))
    cand = (first.join(closure.withColumnRenamed("x", "t1"), "t1")
            .where((F.col("t") != F.col("snapshot_dir")) & (F.col("t") != F.col("snapshot_job_location")))
            .select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "t", (F.col("depth") + 1).alias("depth"),
                    F.concat(F.array(F.col("t1")), F.col("via")).alias("via")))
    direct_targets = direct.select("snapshot_uri", F.col("target_uri").alias("t"))
    cand = cand.join(direct_targets, ["snapshot_uri", "t"], "left_anti")
    trans = (cand.groupBy(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "t")
             .agg(F.min(F.struct("depth", "via")).alias("m")))
    best = F.max_by(F.struct(*TARGET_ATTRS), F.col("target_snapshot_uri").isNotNull().cast("int"))
    targets = direct.groupBy(F.col("target_uri").alias("t")).agg(best.alias("a"))
    rows = (trans.join(targets, "t")
            .select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", F.col("t").alias("target_uri"),
                    *[F.col(f"a.{a}").alias(a) for a in TARGET_ATTRS],
                    F.lit(Dependency.TRANSITIVE).alias("dependency"), F.col("m.depth").cast("int").alias("depth"),
                    F.col("m.via").alias("via"), F.lit(None).cast("long").alias("files"),
                    F.lit(None).cast("long").alias("directories"), F.lit(None).cast("long").alias("bytes")))
    from pyspark.sql.types import StringType, StructField, StructType

    related = rows.mapInArrow(relate_batches, StructType(list(rows.schema.fields)
                                                         + [StructField("relation", StringType(), True)]))
    return related.select(*direct_edges_columns())

