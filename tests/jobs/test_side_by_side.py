"""statekeeper.jobs.side_by_side: parts of one job on one session, each in a thread of its own."""
from __future__ import annotations

import logging
import threading

import pytest

from statekeeper.jobs.progress import Heartbeat
from statekeeper.jobs.side_by_side import run_side_by_side


def test_each_part_runs_its_spark_jobs_under_its_own_name_and_returns_by_name(spark):
    names: dict[str, str | None] = {}
    started = threading.Barrier(2, timeout=60)

    def part(name: str, n: int):
        def run():
            started.wait()   # both are in flight at once, or this times out
            names[name] = spark.sparkContext.getLocalProperty("spark.job.description")
            return spark.range(n).count()
        return run

    with Heartbeat(spark, logging.getLogger("test"), "run x", 0) as beat:
        out = run_side_by_side(spark, beat, {"ten": part("ten", 10), "twenty": part("twenty", 20)})
    assert out == {"ten": 10, "twenty": 20}
    assert names == {"ten": "run x: ten", "twenty": "run x: twenty"}


def test_a_failing_part_raises_after_the_others_have_finished(spark):
    finished = []

    def slow():
        n = spark.range(1000).selectExpr("sum(id)").first()[0]
        finished.append("slow")
        return n

    def fails():
        raise ValueError("part failed")

    with Heartbeat(spark, logging.getLogger("test"), "run y", 0) as beat:
        with pytest.raises(ValueError, match="part failed"):
            run_side_by_side(spark, beat, {"fails": fails, "slow": slow})
    assert finished == ["slow"]
