"""The wording of the findings Spark computes whole: SQL expressions over a finding's columns.

The per-file findings (`checks.file_findings`) are worded in Python, in the one task stage that decides
them. These details are only words over columns the joins already computed, so they are expressions in
the same plans: a Python function applied to a column needs a Python stage of its own and an analysis
of the whole plan for the output schema, which cost a validation run about a second on a small store.

Null values read as Python's f-strings print them ("None"), so the wording is the same as when these
were Python functions; tests/validate/test_wording.py holds the expected texts.
"""
from __future__ import annotations

from typing import Any

from statekeeper.tables.vocabulary import Relation, SnapshotStatus, SnapshotType, TargetKind

_SHOWN = 3   # candidates named in a relative hint; the rest are counted


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def _text(column: str) -> Any:
    """A column as an f-string prints it."""
    F = _F()
    return F.coalesce(F.col(column).cast("string"), F.lit("None"))


def _or(column: str, default: Any) -> Any:
    """Python's `value or default`: a null, zero or empty value reads as the default."""
    F = _F()
    c = F.col(column)
    empty = F.lit(0) if isinstance(default, int) else F.lit("")
    return F.when(c.isNull() | (c == empty), F.lit(default)).otherwise(c).cast("string")


def metadata_detail() -> Any:
    """Over (status, error) of a snapshot whose `_metadata` was not usable."""
    F = _F()
    return F.concat(F.lit("_metadata is "), _text("status"), F.lit(": "), _or("error", "no detail"))


def snapshot_detail() -> Any:
    """Over (status, errors, warnings, files) of a snapshot's summary row."""
    F = _F()
    usable = F.col("status").isNull() | (F.col("status") == SnapshotStatus.OK)
    return F.when(usable, F.concat(_text("errors"), F.lit(" error(s), "), _text("warnings"), F.lit(" warning(s); "),
                                   _text("files"), F.lit(" referenced file(s) checked"))).otherwise(
        F.concat(F.lit("_metadata not usable ("), _text("status"), F.lit("); "), _text("errors"), F.lit(" error(s)")))


def cross_directory_detail() -> Any:
    """Over (relation, target_kind, target_uri, target_job_id, files, directories, bytes) of a direct edge."""
    F = _F()
    uri = _text("target_uri")
    job = F.when(F.col("target_job_id").isNull() | (F.col("target_job_id") == ""), F.lit("")).otherwise(
        F.concat(F.lit(" (job "), F.col("target_job_id"), F.lit(")")))
    where = (F.when(F.col("target_kind") == TargetKind.CHECKPOINT,
                    F.concat(F.lit("checkpoint directory "), uri, F.lit(" of another job")))
             .when(F.col("relation") == Relation.OTHER_JOB, F.concat(F.lit("another job's directory "), uri, job))
             .when(F.col("relation") == Relation.SAVEPOINT, F.concat(F.lit("savepoint "), uri))
             .when(F.col("relation") == Relation.EXTERNAL, F.concat(uri, F.lit(", outside every indexed root")))
             .otherwise(uri))
    dirs = F.when(F.col("directories").isNull() | (F.col("directories") == 0), F.lit("")).otherwise(
        F.concat(F.lit(" and "), F.col("directories").cast("string"), F.lit(" file-merging directory(ies)")))
    return F.concat(F.lit("uses "), _or("files", 0), F.lit(" file(s), "), _or("bytes", 0), F.lit(" bytes"), dirs,
                    F.lit(" in "), where, F.lit(": a cross-directory dependency; deleting or moving that location "
                                                "breaks this snapshot"))


def relative_hint() -> Any:
    """Over (detail, candidates, snapshot_type): a relative_resolves detail extended with where a file of that
    name does exist (`candidates`, sorted; FLINK-39964 leaves it in the restored savepoint's directory)."""
    F = _F()
    n = F.coalesce(F.size("candidates"), F.lit(0))
    more = F.when(n > _SHOWN, F.concat(F.lit(" (+"), (n - _SHOWN).cast("string"), F.lit(" more)"))).otherwise(
        F.lit(""))
    shown = F.concat(F.array_join(F.slice(F.sort_array("candidates"), 1, _SHOWN), ", "), more)
    checkpoint = F.concat(
        F.lit("; a file with this name exists at "), shown,
        F.lit(": the FLINK-39964 pattern (a checkpoint taken after a CLAIM restore of a native savepoint keeps "
              "that savepoint's files as relative handles, which Flink resolves against the checkpoint's own "
              "directory); rewrite the handle as an absolute path to repair it"))
    other = F.concat(F.lit("; a file with this name exists at "), shown,
                     F.lit("; if it is a copy of the missing file, putting it back beside _metadata repairs the "
                           "snapshot"))
    hint = (F.when(n == 0, F.lit("; no file with this name exists under any indexed root"))
            .when(F.col("snapshot_type") == SnapshotType.CHECKPOINT, checkpoint).otherwise(other))
    return F.concat(_text("detail"), hint)
