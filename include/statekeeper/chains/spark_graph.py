"""The chain graph as Spark DataFrame transformations (no driver collects).

    uses    = file_uses(references, snapshots, files)   one row per (snapshot, referenced file), located
    direct  = direct_edges(uses)                        one row per (snapshot, target directory)
    trans   = lineage(direct, keep)                 transitive rows, same columns

Location and relation rules are the pure functions of statekeeper.layout.locate, run inside
`mapInArrow`; lineage runs statekeeper.chains.graph over the small graph of target directories in
one task and joins the result back to snapshots here.
Validation reuses `file_uses` and `direct_edges`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statekeeper.chains.errors import ChainDepthError
from statekeeper.layout.locate import (
    ANNOTATION_FIELDS,
    annotate_batches,
    relate_batches,
)
from statekeeper.tables.vocabulary import FOREIGN_RELATIONS, Dependency, FileKind, HandleKind

SNAPSHOT_KEYS = ("snapshot_uri", "root", "root_id", "job_dir")
TARGET_ATTRS = ("target_kind", "target_snapshot_uri", "target_root", "target_root_id", "target_job_dir",
                "target_job_id", "target_job_location")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def _with_fields(schema: Any, fields: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType(list(schema.fields) + [StructField(f.name, from_arrow_type(f.type), True) for f in fields])


def file_uses(references: Any, snapshots: Any, files: Any) -> Any:
    """One row per (snapshot, referenced file or managed directory) with the file's target and its
    listed size.

    Columns: snapshot_uri, root, root_id, job_dir, file_uri, file_root, file_job_dir, file_job_id,
    extent (largest stated end: size, or segment start + length), segmented (named by a
    segment handle), is_dir (a tag-17 managed
    directory, not a file), relative (named by a tag-6 handle), relative_name (its stored name),
    handles (how many handles name it), parent_snapshot_uri/type (the indexed snapshot whose
    directory holds the file, if any), listed_size (its size in `files`, null when the listing
    does not have it), and locate.ANNOTATION_FIELDS.
    """
    F = _F()
    refs = references.select(
        "snapshot_uri", "root", "root_id", "job_dir", "file_uri", "file_root", "file_job_dir", "file_job_id",
        "file_kind", "handle_kind", "stored_path", "stated_size", "segment_start", "segment_length")
    extent = F.coalesce(F.col("segment_start") + F.col("segment_length"), F.col("stated_size"))
    is_relative = F.col("handle_kind") == F.lit(HandleKind.RELATIVE_STREAM_STATE_HANDLE)
    grouped = (refs.groupBy("snapshot_uri", "root", "root_id", "job_dir", "file_uri", "file_root", "file_job_dir",
                            "file_job_id")
               .agg(F.max(extent).alias("extent"),
                    F.max(F.col("file_kind") == F.lit(FileKind.FILE_MERGING_MANAGED_DIR)).alias("is_dir"),
                    F.max(F.col("segment_start").isNotNull()).alias("segmented"),
                    F.max(is_relative).alias("relative"),
                    F.min(F.when(is_relative, F.col("stored_path"))).alias("relative_name"),
                    F.count(F.lit(1)).alias("handles")))
    dirs = snapshots.select(
        F.regexp_replace("uri", "/_metadata$", "").alias("parent_dir"),
        F.col("uri").alias("parent_snapshot_uri"),
        F.col("snapshot_type").alias("parent_snapshot_type"))
    sizes = files.select(F.col("uri").alias("file_uri"), F.col("size").alias("listed_size"))
    located = (grouped.withColumn("parent_dir", F.regexp_extract("file_uri", "^(.*)/[^/]*$", 1))
               .join(dirs, "parent_dir", "left").drop("parent_dir")
               .join(sizes, "file_uri", "left"))
    return located.mapInArrow(annotate_batches, _with_fields(located.schema, ANNOTATION_FIELDS))


def direct_edges(uses: Any) -> Any:
    """One row per (snapshot, target): distinct files, managed directories and bytes it uses there.

    Bytes are the listed sizes from `files` (what the files occupy), the stated extent for files
    the listing does not have (missing or outside every root).
    """
    F = _F()
    u = uses
    file_bytes = F.coalesce(F.col("listed_size"), F.col("extent"), F.lit(0))
    # Rows of one target agree on its attributes, except that files below a snapshot directory's
    # subdirectories do not see the snapshot: prefer the attributes seen with it.
    best = F.max_by(F.struct(*TARGET_ATTRS, "relation"), F.col("target_snapshot_uri").isNotNull().cast("int"))
    grouped = (u.groupBy(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri")
               .agg(best.alias("t"),
                    F.sum(F.when(~F.col("is_dir"), 1).otherwise(0)).cast("long").alias("files"),
                    F.sum(F.when(F.col("is_dir"), 1).otherwise(0)).cast("long").alias("directories"),
                    F.sum(F.when(~F.col("is_dir"), file_bytes).otherwise(0)).cast("long").alias("bytes")))
    return grouped.select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri",
                          *[F.col(f"t.{a}").alias(a) for a in TARGET_ATTRS], F.col("t.relation").alias("relation"),
                          F.lit(Dependency.DIRECT).alias("dependency"), F.lit(1).cast("int").alias("depth"),
                          F.array().cast("array<string>").alias("via"), "files", "directories", "bytes")


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


def node_closure(direct: Any, max_depth: int = 64) -> Any:
    """(x, t, depth, via): target t reachable from target x through cross-directory dependencies of
    x's member snapshots (statekeeper.chains.graph.node_closure, run in one Spark task)."""
    F = _F()
    foreign = direct.where(F.col("relation").isin(*sorted(FOREIGN_RELATIONS)))
    # Lineage is only ever asked from a target and only expands through targets: keep the edges
    # leaving directories that something depends on.
    targets = foreign.select(F.col("target_uri").alias("x")).distinct()
    edges = (foreign.select(
        F.explode(F.array_distinct(F.array("snapshot_dir", "snapshot_job_location"))).alias("x"),
        F.col("target_uri").alias("t")).where(F.col("x") != F.col("t"))
        .join(targets, "x", "left_semi").distinct())
    return edges.repartition(1).mapInArrow(ClosureTask(max_depth),
                                           "x string, t string, depth int, via array<string>")


def lineage(direct: Any, keep: Callable[[Any], Any], max_depth: int = 64) -> Any:
    """Transitive dependency rows (dependency 'transitive', depth >= 2) with direct_edges' columns;
    files/directories/bytes are null: the snapshot uses none of those files itself."""
    F = _F()
    foreign = keep(direct.where(F.col("relation").isin(*sorted(FOREIGN_RELATIONS))))
    if foreign.isEmpty():
        # No cross-directory dependency at all (e.g. only NO_CLAIM restores): no lineage.
        return lineage_schema_frame(direct)
    closure = keep(node_closure(direct, max_depth))
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


def lineage_schema_frame(direct: Any) -> Any:
    """An empty DataFrame with the lineage rows' columns and types."""
    F = _F()
    return direct.limit(0).select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri",
                                  *TARGET_ATTRS, "relation", F.lit(Dependency.TRANSITIVE).alias("dependency"),
                                  "depth", "via",
                                  F.lit(None).cast("long").alias("files"),
                                  F.lit(None).cast("long").alias("directories"),
                                  F.lit(None).cast("long").alias("bytes"))


def direct_edges_columns() -> list[str]:
    return [*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri", *TARGET_ATTRS, "relation",
            "dependency", "depth", "via", "files", "directories", "bytes"]
