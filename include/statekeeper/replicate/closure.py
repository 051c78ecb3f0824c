"""Every object a chosen snapshot references and where it goes at the target, in Spark.

From the index's `references` (the codec's reading of each `_metadata`): own exclusive files,
own and other jobs' `shared/`, savepoint files, segment files (whole physical files: offsets are
absolute), channel state, changelog files. Tag-17 managed directories are not objects; they are
mapped in the rewritten `_metadata` and created for local targets. Paths below a root are mirrored
below its target root, so a file several snapshots share maps to one target and is copied once.
"""
from __future__ import annotations

from typing import Any

from statekeeper.replicate.relocate import EXTERNAL_DIR
from statekeeper.tables.vocabulary import FileKind

CLOSURE_COLUMNS = ("snapshot_uri", "target_metadata_uri", "source_uri", "target_uri", "expected_size",
                   "expected_version", "is_dir", "external")


def mapped(column: str, mapping: dict[str, str]) -> Any:
    """Spark expression: the target URI of a canonical source URI column (null when no root covers it),
    longest source-root prefix first, on whole path segments (relocate.target_of, as a column).

    One SQL expression parsed by the JVM: built from Column calls it took about eight py4j round trips per
    root, and a DR round builds it five times (a third of a second of the sample store's run). Roots whose
    URIs a SQL string literal would have to escape are built from Column calls, as they were."""
    from pyspark.sql import functions as F

    pairs = [(src.rstrip("/"), dst.rstrip("/")) for src, dst in sorted(mapping.items(), key=lambda kv: -len(kv[0]))]
    if not pairs:
        return F.lit(None).cast("string")
    if any("'" in uri or "\\" in uri for pair in pairs for uri in pair):
        return _mapped_by_columns(F.col(column), pairs)
    col = f"`{column}`"
    cases = " ".join(f"WHEN {col} = '{src}' OR startswith({col}, '{src}/') "
                     f"THEN concat('{dst}', substring({col}, {len(src) + 1}))" for src, dst in pairs)
    return F.expr(f"CASE {cases} END")


def _mapped_by_columns(column: Any, pairs: list[tuple[str, str]]) -> Any:
    from pyspark.sql import functions as F

    expr = None
    for src, dst in pairs:
        cond = (column == F.lit(src)) | column.startswith(src + "/")
        value = F.concat(F.lit(dst), F.substring(column, len(src) + 1, 1 << 30))
        expr = F.when(cond, value) if expr is None else expr.when(cond, value)
    return expr


def closure(chosen: Any, references: Any, files: Any, mapping: dict[str, str]) -> Any:
    """CLOSURE_COLUMNS rows of the `chosen` snapshots (their `snapshot_uri`, `root`)."""
    from pyspark.sql import functions as F

    refs = (references.join(chosen.select("snapshot_uri").distinct(), "snapshot_uri", "left_semi")
            .select("snapshot_uri", "root", F.col("file_uri").alias("source_uri"), "file_kind")
            .distinct())
    # The version the index saw (files.etag) pins the copy: a source rewritten since is refused by the store.
    sizes = files.select(F.col("uri").alias("source_uri"), F.col("size").alias("expected_size"),
                         F.col("etag").alias("expected_version"))
    external = F.col("file_kind") == FileKind.EXTERNAL.value
    snapshot_target_root = mapped("root", mapping)
    # An external file goes below its snapshot's target root: <target root>/_external/<scheme>/<rest>.
    external_target = F.concat(snapshot_target_root, F.lit(f"/{EXTERNAL_DIR}/"),
                               F.regexp_replace(F.col("source_uri"), r"^([A-Za-z][A-Za-z0-9+.-]*):/+", "$1/"))
    return (refs.join(sizes, "source_uri", "left")
            .select("snapshot_uri",
                    mapped("snapshot_uri", mapping).alias("target_metadata_uri"),
                    "source_uri",
                    F.when(external, external_target).otherwise(mapped("source_uri", mapping))
                    .alias("target_uri"),
                    "expected_size", "expected_version",
                    (F.col("file_kind") == FileKind.FILE_MERGING_MANAGED_DIR.value).alias("is_dir"),
                    external.alias("external")))
