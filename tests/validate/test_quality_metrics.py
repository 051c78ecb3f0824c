"""The quality suite's Spark-computed metrics give GX's own verdicts and results.

The validation job computes every expectation's metrics in one Spark query and lets GX decide and
format each result from them (statekeeper.validate.quality_metrics). Here the same suite runs both
ways over one frame that breaks every kind of expectation the suite uses (nulls, duplicates in a
column and in a compound key, all-null compound keys that GX ignores, values out of range and out
of set, a missing column), and the results must be the same: GX's Spark engine is the reference.
"""
from __future__ import annotations

import pytest
from pyspark.sql import types as T

from statekeeper.validate.quality import _prepare_gx, _suite_result
from statekeeper.validate.quality_metrics import QualityMetricError, compute

pytestmark = pytest.mark.spark

SCHEMA = T.StructType([
    T.StructField("uri", T.StringType()), T.StructField("size", T.LongType()),
    T.StructField("ok", T.BooleanType()), T.StructField("a", T.StringType()), T.StructField("b", T.LongType())])
ROWS = [
    ("s3://x/1", 10, True, "j1", 1),
    ("s3://x/1", -5, True, "j1", 1),        # duplicate uri, negative size, duplicate compound key
    ("s3://x/2", None, False, "j1", 1),     # null size (missing, not unexpected), flag out of set
    (None, 200, None, None, None),          # null uri, size above the strict max, all-null key (ignored)
    ("s3://x/3", 0, True, None, None),      # the other all-null key
    ("s3://x/4", 100, False, "j2", None),   # partly null compound keys, duplicated
    ("s3://x/5", -1, True, "j2", None),
    ("s3://x/5", 7, True, "j3", -2),        # second duplicated uri, negative b
]
EXPECTATIONS = [
    ("ExpectTableColumnsToMatchSet", {"column_set": ["uri", "size", "ok", "a", "b"], "exact_match": True}),
    ("ExpectTableColumnsToMatchSet", {"column_set": ["uri", "size", "gone"], "exact_match": True}),
    ("ExpectColumnValuesToNotBeNull", {"column": "uri"}),
    ("ExpectColumnValuesToNotBeNull", {"column": "a"}),
    ("ExpectColumnValuesToBeUnique", {"column": "uri"}),
    ("ExpectColumnValuesToBeBetween", {"column": "size", "min_value": 0}),
    ("ExpectColumnValuesToBeBetween", {"column": "size", "min_value": 0, "max_value": 100, "strict_max": True}),
    ("ExpectColumnValuesToBeBetween", {"column": "b", "min_value": 0}),
    ("ExpectColumnValuesToBeInSet", {"column": "ok", "value_set": [True]}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["a", "b"]}),
]


def _native(g, df, name):
    """The suite as GX's Spark engine runs it."""
    suite = g.context.suites.add(_suite(g, f"native.{name}"))
    batch = (g.context.data_sources.add_spark(name=f"native-{name}").add_dataframe_asset(name=name)
             .add_batch_definition_whole_dataframe("all"))
    definition = g.context.validation_definitions.add(
        g.gx.ValidationDefinition(name=f"native.{name}", data=batch, suite=suite))
    return definition.run(batch_parameters={"dataframe": df}, result_format={"result_format": "SUMMARY"})


def _suite(g, name):
    suite = g.gx.ExpectationSuite(name=name)
    for kind, kwargs in EXPECTATIONS:
        suite.add_expectation(getattr(g.gx.expectations, kind)(**kwargs))
    return suite


def _comparable(evr):
    result = dict(evr.result)
    for key in ("partial_unexpected_list", "observed_value"):
        if isinstance(result.get(key), list):
            result[key] = sorted(result[key], key=repr)
    if "partial_unexpected_counts" in result:
        result["partial_unexpected_counts"] = sorted(result["partial_unexpected_counts"], key=repr)
    if "details" in result:
        result["details"] = {k: sorted(v, key=repr) if isinstance(v, list) else v
                             for k, v in result["details"].items()}
    kwargs = {k: v for k, v in evr.expectation_config.kwargs.items() if k != "batch_id"}
    return evr.expectation_config.type, repr(sorted(kwargs.items())), evr.success, result


@pytest.fixture(scope="module")
def gx_context():
    g = _prepare_gx()
    yield g
    g.docs.cleanup()


def test_spark_metrics_give_gx_native_results(spark, gx_context):
    from great_expectations.core.run_identifier import RunIdentifier

    df = spark.createDataFrame(ROWS, SCHEMA)
    native = _native(gx_context, df, "frame")
    metrics = compute([("frame", df, EXPECTATIONS)])
    ours = _suite_result(gx_context, gx_context.context.suites.add(_suite(gx_context, "ours.frame")), "frame",
                         metrics["frame"], RunIdentifier(run_name="test"))
    # GX orders a suite's results its own way: compared by expectation.
    assert sorted(map(_comparable, ours.results)) == sorted(map(_comparable, native.results))
    # The frame breaks every expectation but the first column set's: a check that nothing passes vacuously.
    assert sorted(r.success for r in ours.results) == [False] * (len(EXPECTATIONS) - 1) + [True]
    assert ours.statistics == native.statistics


def test_several_assets_in_one_query_and_clean_ones_pass(spark, gx_context):
    """Assets of different widths share the query; an asset without violations has empty samples."""
    from great_expectations.core.run_identifier import RunIdentifier

    dirty = spark.createDataFrame(ROWS, SCHEMA)
    clean = spark.createDataFrame([r for r in ROWS if r[0] in ("s3://x/2", "s3://x/3")], SCHEMA)
    few = [("ExpectColumnValuesToNotBeNull", {"column": "uri"}), ("ExpectColumnValuesToBeUnique", {"column": "uri"})]
    metrics = compute([("dirty", dirty, EXPECTATIONS), ("clean", clean, few), ("empty", clean.limit(0), few)])
    assert metrics["clean"].get("column_values.unique.unexpected_count", ("uri",)) == 0
    assert metrics["clean"].get("column_values.unique.unexpected_values", ("uri",)) == []
    assert metrics["dirty"].get("column_values.unique.unexpected_count", ("uri",)) == 4
    assert metrics["empty"].get("table.row_count") == 0
    suite = gx_context.gx.ExpectationSuite(name="ours.clean")
    for kind, kwargs in few:
        suite.add_expectation(getattr(gx_context.gx.expectations, kind)(**kwargs))
    result = _suite_result(gx_context, gx_context.context.suites.add(suite), "clean", metrics["clean"],
                           RunIdentifier(run_name="test"))
    assert result.success and result.statistics["evaluated_expectations"] == 2


def test_an_expectation_without_spark_metrics_is_refused(spark):
    df = spark.createDataFrame(ROWS, SCHEMA)
    with pytest.raises(QualityMetricError, match="ExpectColumnValuesToMatchRegex"):
        compute([("frame", df, [("ExpectColumnValuesToMatchRegex", {"column": "uri", "regex": "^s3"})])])


def test_distinct_keys_of_one_hash_are_not_duplicates(spark):
    """Keys are grouped by a 64-bit hash first. Spark's xxhash64 skips nulls, so ("x", null) and (null, "x")
    share a hash: the exact second grouping must still tell them apart, and count a real duplicate."""
    schema = "c1 string, c2 string"
    assert len({r[0] for r in spark.createDataFrame([("x", None), (None, "x")], schema)
                .selectExpr("xxhash64(c1, c2)").collect()}) == 1    # the collision this test relies on
    rows = [("x", None), (None, "x"), ("y", "z"), ("y", "z"), ("y", "z"), ("q", None)]
    df = spark.createDataFrame(rows, schema)
    key = ("ExpectCompoundColumnsToBeUnique", {"column_list": ["c1", "c2"]})
    single = ("ExpectColumnValuesToBeUnique", {"column": "c1"})
    got = compute([("pairs", df, [key, single])])["pairs"]
    assert got.get("compound_columns.unique.unexpected_count", ("c1", "c2")) == 3
    assert got.get("column_values.unique.unexpected_count", ("c1",)) == 3
    assert sorted(map(repr, got.get("compound_columns.unique.unexpected_values", ("c1", "c2")))) == [
        repr({"c1": "y", "c2": "z"})] * 3
