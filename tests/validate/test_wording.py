"""The findings' SQL wording (statekeeper.validate.wording) reads as written, nulls included.

The texts are spelled out: they are what validation_results holds and what users grep for, and they were
Python f-strings before (None printed as "None", `x or default`), which the SQL forms keep.
"""
from __future__ import annotations

import pytest

from statekeeper.validate import wording


def _worded(spark, expression, schema: str, rows: list[tuple]) -> list[str]:
    df = spark.createDataFrame(rows, schema).coalesce(1)
    return [r[0] for r in df.select(expression).collect()]


def test_metadata_detail(spark):
    got = _worded(spark, wording.metadata_detail(), "status string, error string",
                  [("parse_error", "bad magic 0x00"), ("unreadable", None), ("unsupported", "")])
    assert got == ["_metadata is parse_error: bad magic 0x00", "_metadata is unreadable: no detail",
                   "_metadata is unsupported: no detail"]


def test_snapshot_detail(spark):
    got = _worded(spark, wording.snapshot_detail(), "status string, errors long, warnings long, files long",
                  [("ok", 0, 2, 12345678901), (None, 1, 0, 3), ("parse_error", 1, 0, 0)])
    assert got == ["0 error(s), 2 warning(s); 12345678901 referenced file(s) checked",
                   "1 error(s), 0 warning(s); 3 referenced file(s) checked",
                   "_metadata not usable (parse_error); 1 error(s)"]


_EDGE = ("relation string, target_kind string, target_uri string, target_job_id string, files long, "
         "directories long, bytes long")
_TAIL = ": a cross-directory dependency; deleting or moving that location breaks this snapshot"


@pytest.mark.parametrize("row, text", [
    (("other_job", "job", "s3://b/ck/j1", "j1", 2, 0, 300),
     "uses 2 file(s), 300 bytes in another job's directory s3://b/ck/j1 (job j1)"),
    (("other_job", "job", "s3://b/ck/j1", "", 2, None, 300),
     "uses 2 file(s), 300 bytes in another job's directory s3://b/ck/j1"),
    (("other_job", "checkpoint", "s3://b/ck/j1/chk-4", "j1", 1, 3, 10),
     "uses 1 file(s), 10 bytes and 3 file-merging directory(ies) in checkpoint directory s3://b/ck/j1/chk-4 "
     "of another job"),
    (("savepoint", "savepoint", "s3://b/sp/savepoint-1", None, None, None, None),
     "uses 0 file(s), 0 bytes in savepoint s3://b/sp/savepoint-1"),
    (("external", "external", "s3://other/x", None, 5, 0, 7), "uses 5 file(s), 7 bytes in s3://other/x, "
     "outside every indexed root"),
    (("own_job", "job", None, None, 1, 0, 1), "uses 1 file(s), 1 bytes in None"),
])
def test_cross_directory_detail(spark, row, text):
    assert _worded(spark, wording.cross_directory_detail(), _EDGE, [row]) == [text + _TAIL]


_MISSING = "relative handle 'f1' does not resolve: no s3://b/ck/j/chk-3/f1 beside _metadata"


@pytest.mark.parametrize("candidates, snapshot_type, hint", [
    (None, "checkpoint", "; no file with this name exists under any indexed root"),
    ([], "savepoint", "; no file with this name exists under any indexed root"),
    (["s3://b/sp/savepoint-x/f1"], "checkpoint",
     "; a file with this name exists at s3://b/sp/savepoint-x/f1: the FLINK-39964 pattern (a checkpoint taken "
     "after a CLAIM restore of a native savepoint keeps that savepoint's files as relative handles, which Flink "
     "resolves against the checkpoint's own directory); rewrite the handle as an absolute path to repair it"),
    ([f"s3://b/x{i}/f1" for i in (4, 1, 3, 0, 2)], None,
     "; a file with this name exists at s3://b/x0/f1, s3://b/x1/f1, s3://b/x2/f1 (+2 more); if it is a copy of "
     "the missing file, putting it back beside _metadata repairs the snapshot"),
    (["s3://b/é/f1", "s3://b/e/f1", "s3://b/Z/f1"], "savepoint",   # code point order, as Python sorts
     "; a file with this name exists at s3://b/Z/f1, s3://b/e/f1, s3://b/é/f1; if it is a copy of the missing "
     "file, putting it back beside _metadata repairs the snapshot"),
])
def test_relative_hint(spark, candidates, snapshot_type, hint):
    got = _worded(spark, wording.relative_hint(), "detail string, candidates array<string>, snapshot_type string",
                  [(_MISSING, candidates, snapshot_type)])
    assert got == [_MISSING + hint]


def _evidence(spark, rows: list[tuple]):
    return spark.createDataFrame(rows, "snapshot_uri string, file_uri string, indexed_root boolean, listed_size long, "
                                       "stat_status string, stat_size long, stat_error string, extent long, "
                                       "segmented boolean, relative boolean, relative_name string")


def test_relative_hint_reads_only_the_listed_files_of_missing_names(spark):
    """The hint joins the listing only where a relative file is missing, and never shuffles the whole listing by
    name: at 1M objects that shuffle cost a core ~40 s, and ran on after the query ended when nothing was missing
    (Spark's adaptive execution drops an empty join without stopping the other side's running tasks)."""
    from statekeeper.validate.spark_checks import file_findings

    snapshot = "s3://b/ck/j/chk-3/_metadata"
    files = spark.createDataFrame([("s3://b/sp/savepoint-x/f1",), ("s3://b/ck/j/shared/f2",), ("s3://b/other/f1",)],
                                  "uri string")
    snapshots = spark.createDataFrame([(snapshot, "checkpoint")], "uri string, snapshot_type string")
    missing = _evidence(spark, [(snapshot, "s3://b/ck/j/chk-3/f1", True, None, None, None, None, 10, False, True, "f1"),
                                (snapshot, "s3://b/ck/j/shared/f2", True, 5, None, None, None, 5, False, False, None)])
    found = file_findings(missing, files, snapshots)
    plan = found._jdf.queryExecution().executedPlan().toString()
    assert "LeftSemi" in plan and "BroadcastExchange" in plan, plan
    rows = {r["subject"]: r["detail"] for r in found.collect()}
    assert set(rows) == {"s3://b/ck/j/chk-3/f1"}
    assert "exists at s3://b/other/f1, s3://b/sp/savepoint-x/f1" in rows["s3://b/ck/j/chk-3/f1"], rows
    # nothing missing: no finding
    fine = _evidence(spark, [(snapshot, "s3://b/ck/j/shared/f2", True, 5, None, None, None, 5, False, False, None)])
    assert file_findings(fine, files, snapshots).collect() == []
