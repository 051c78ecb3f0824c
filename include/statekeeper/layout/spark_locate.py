"""Locating referenced files as Spark DataFrame transformations (no driver collects).

    uses    = file_uses(references, snapshots, files)   one row per (snapshot, referenced file)
    direct  = direct_edges(uses)                        one row per (snapshot, target directory)

The location and relation rules are the pure functions of statekeeper.layout.locate, run inside
`mapInArrow` once per (snapshot, file directory): every file of a directory with the same root, job
and parent snapshot has the same target, so `direct_edges` sums the files per directory in SQL first
and hands Python a row per directory, not per file. Chains builds lineage on `direct_edges`;
validation checks files on `file_uses`.
"""
from __future__ import annotations

from typing import Any

from statekeeper.layout.classify import FLAT_DIR_PATTERN, JOB_ID_PATTERN, SAVEPOINT_DIR_PATTERN
from statekeeper.layout.locate import ANNOTATION_FIELDS, ROOT_LEVEL, TARGET_INPUTS, annotate_batches
from statekeeper.tables.vocabulary import Dependency, FileKind, HandleKind, UnitKind

SNAPSHOT_KEYS = ("snapshot_uri", "root", "root_id", "job_dir")
TARGET_ATTRS = ("target_kind", "target_snapshot_uri", "target_root", "target_root_id", "target_job_dir",
                "target_job_id", "target_job_location")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def job_of(column: str = "job_dir") -> Any:
    """`locate.location_job_dir` as a Spark column: the job directory a unit of the index belongs to.

    The index names a unit by the first path segment below its root, so a root holding one job's chk-N/,
    shared/ and taskowned/ directly (create-subdir off, or a root given at a job's own directory) has a
    unit per checkpoint and one for shared/; they are all the root's job, ".". Rules about a job (its
    checkpoints' ranking, whether it looks active, whether it has a snapshot) group by this, never by the
    unit's name."""
    F = _F()
    return F.when(F.col(column).rlike(FLAT_DIR_PATTERN), F.lit(ROOT_LEVEL)).otherwise(F.col(column))


def job_location_of(root: str = "root", job_dir: str = "job_dir") -> Any:
    """`locate.job_location` as a Spark column: the URI of the directory that plays the job (the root itself
    for a flat layout)."""
    F = _F()
    return (F.when(job_of(job_dir) == F.lit(ROOT_LEVEL), F.col(root))
            .otherwise(F.concat(F.regexp_replace(F.col(root), "/+$", ""), F.lit("/"), F.col(job_dir))))


def unit_kind_of(job_dir: str = "job_dir") -> Any:
    """`locate.unit_kind` as a Spark column: job, savepoint or directory."""
    F = _F()
    unit = F.col(job_dir)
    return (F.when((job_of(job_dir) == F.lit(ROOT_LEVEL)) | unit.rlike(JOB_ID_PATTERN), F.lit(UnitKind.JOB.value))
            .when(unit.rlike(SAVEPOINT_DIR_PATTERN), F.lit(UnitKind.SAVEPOINT.value))
            .otherwise(F.lit(UnitKind.DIRECTORY.value)))


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
    handles (how many handles name it), file_dir (the directory holding it: `locate.parent_dir`,
    empty when its URI has none), parent_snapshot_uri/type (the indexed snapshot whose directory
    holds the file, if any), listed_size (its size in `files`, null when the listing does not have
    it).
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
    return (grouped.withColumn("file_dir", F.regexp_extract("file_uri", "^(.*)/[^/]*$", 1))
            .join(dirs, F.col("file_dir") == F.col("parent_dir"), "left").drop("parent_dir")
            .join(sizes, "file_uri", "left"))


def direct_edges(uses: Any) -> Any:
    """One row per (snapshot, target): distinct files, managed directories and bytes it uses there.

    Bytes are the listed sizes from `files` (what the files occupy), the stated extent for files
    the listing does not have (missing or outside every root).
    """
    F = _F()
    file_bytes = F.coalesce(F.col("listed_size"), F.col("extent"), F.lit(0))
    per_dir = (uses.groupBy(*SNAPSHOT_KEYS, *TARGET_INPUTS)
               .agg(F.sum(F.when(~F.col("is_dir"), 1).otherwise(0)).cast("long").alias("files"),
                    F.sum(F.when(F.col("is_dir"), 1).otherwise(0)).cast("long").alias("directories"),
                    F.sum(F.when(~F.col("is_dir"), file_bytes).otherwise(0)).cast("long").alias("bytes")))
    located = per_dir.mapInArrow(annotate_batches, _with_fields(per_dir.schema, ANNOTATION_FIELDS))
    # Directories of one target agree on its attributes, except that files below a snapshot directory's
    # subdirectories do not see the snapshot: prefer the attributes seen with it.
    best = F.max_by(F.struct(*TARGET_ATTRS, "relation"), F.col("target_snapshot_uri").isNotNull().cast("int"))
    grouped = (located.groupBy(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri")
               .agg(best.alias("t"), *[F.sum(c).cast("long").alias(c) for c in ("files", "directories", "bytes")]))
    return grouped.select(*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri",
                          *[F.col(f"t.{a}").alias(a) for a in TARGET_ATTRS], F.col("t.relation").alias("relation"),
                          F.lit(Dependency.DIRECT).alias("dependency"), F.lit(1).cast("int").alias("depth"),
                          F.array().cast("array<string>").alias("via"), "files", "directories", "bytes")


def direct_edges_columns() -> list[str]:
    return [*SNAPSHOT_KEYS, "snapshot_dir", "snapshot_job_location", "target_uri", *TARGET_ATTRS, "relation",
            "dependency", "depth", "via", "files", "directories", "bytes"]
