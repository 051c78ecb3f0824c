"""The DR job maps source URIs to target URIs in Spark (`closure.mapped`) as `relocate.target_of` maps them in
the rewritten `_metadata`: a copied object and the name the `_metadata` gives it must be the same URI.

`mapped` is one SQL expression when every root can be written as a SQL string literal as it is, and Column
calls when a root holds a quote or a backslash; both are held to the pure function here, in real Spark.
"""
from __future__ import annotations

import pytest

from statekeeper.replicate.closure import mapped
from statekeeper.replicate.relocate import target_of

pytestmark = pytest.mark.spark

PLAIN = {"s3://a/flink": "s3://dr/flink", "s3://a/flink/sp": "s3://dr2/sp/", "file:///x y/ü": "file:///t/ü%20"}
ESCAPED = {**PLAIN, "s3://a/it's": "s3://b/x\\y", "file:///back\\slash": "file:///t/plain"}
URIS = ["s3://a/flink", "s3://a/flink/", "s3://a/flink/j/chk-1/_metadata", "s3://a/flinkx/j", "s3://a/flink/sp/s1/f",
        "s3://a/flink/spx", "file:///x y/ü/a", "file:///x y/üb", "s3://a/it's/j/f", "s3://a/it'sx",
        "file:///back\\slash/f", "other", None]


@pytest.mark.parametrize("mapping", [PLAIN, ESCAPED, {}], ids=["sql-expression", "column-calls", "no-roots"])
def test_spark_mapping_is_the_rewrites_mapping(spark, mapping):
    df = spark.createDataFrame([(u,) for u in URIS], "uri string")
    rows = df.select("uri", mapped("uri", mapping).alias("target")).collect()
    assert len(rows) == len(URIS)
    for row in rows:
        expected = None if row["uri"] is None else target_of(row["uri"], mapping)
        assert row["target"] == expected, (row["uri"], mapping)
    if mapping:
        assert any(r["target"] is not None for r in rows)
