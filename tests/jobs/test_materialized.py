"""What a job keeps (statekeeper.jobs.context.Materialized): computed once, a leaf in every plan built
on it, and freed when the job ends.

A cached frame kept its whole plan, so frames built on kept frames nested every plan below them; Spark
plans and describes (for its SQL listener) that whole tree on every action and adaptive re-plan, and
a DR copy round spent more than half its time there. These pin the property that removed it.
"""
from __future__ import annotations

import pytest

from statekeeper.jobs.context import Materialized

pytestmark = [pytest.mark.spark]


def _deep(spark, levels: int, keep=None):
    """A frame built by `levels` joins, each on the previous result (kept, when `keep` is given)."""
    from pyspark.sql import functions as F

    df = spark.range(50).withColumn("v", F.col("id") * 2)
    for level in range(levels):
        other = spark.range(50).withColumn(f"w{level}", F.col("id") + level)
        df = df.join(other, "id").withColumn("v", F.col("v") + F.col(f"w{level}")).drop(f"w{level}")
        if keep is not None:
            df = keep(df)
    return df


def _plan_text(df) -> str:
    return df._jdf.queryExecution().optimizedPlan().treeString()


def test_a_kept_frame_is_a_leaf_whatever_it_was_built_from(spark):
    with Materialized() as keep:
        shallow = keep(_deep(spark, 1))
        deep = _deep(spark, 6, keep)
        assert deep.count() == 50
        # every level's rows are the same as computed without keeping anything
        assert sorted(r["v"] for r in deep.collect()) == sorted(r["v"] for r in _deep(spark, 6).collect())
        # the plan of a frame built on kept frames holds them as leaves, not their plans: it does not
        # grow with the depth of what was kept
        top = deep.join(shallow.select("id"), "id")
        assert "Join" not in _plan_text(deep)
        assert _plan_text(top).count("Join") == 1


def test_kept_frames_are_computed_once_and_released_when_the_job_ends(spark):
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    calls = sc.accumulator(0)

    def counted(v: int) -> int:
        calls.add(1)
        return v

    udf = F.udf(counted, "long")
    before = sc._jsc.getPersistentRDDs().size()
    with Materialized() as keep:
        kept = keep(spark.range(20).select(udf("id").alias("id")))
        assert calls.value == 20
        kept.count()
        kept.join(kept.withColumnRenamed("id", "other"), kept.id == F.col("other")).count()
        assert calls.value == 20, "a kept frame's tasks (copies, deletes) must not run again"
        assert sc._jsc.getPersistentRDDs().size() > before
    assert sc._jsc.getPersistentRDDs().size() == before
