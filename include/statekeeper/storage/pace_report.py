"""What a run achieved per prefix, gathered from its Spark tasks: the engines' lane reports (statekeeper.storage.
pacing) travel to the driver in an accumulator, merged per prefix (a job prefix several tasks worked on adds up:
items, requests and throttled requests summed, its time the span from the first task's start to the last one's
end), and become a few summary lines.

    acc = spark.sparkContext.accumulator({}, PrefixAccumulator())
    ... task: acc.add(prefix_rows(engine_or_mover.prefix_report()))
    lines = describe(acc.value, top=10)
"""
from __future__ import annotations

from typing import Any

from statekeeper.storage.pacing import LaneReport

# lane -> [items, requests, throttled, started, ended, start_rate, final_rate, lowest_rate]
Rows = dict[str, list[Any]]


def prefix_rows(reports: list[LaneReport]) -> Rows:
    return {r.lane: [r.items, r.requests, r.throttled, r.started, r.ended, r.start_rate, r.final_rate, r.lowest_rate]
            for r in reports if r.requests}


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def merge(into: Rows, other: Rows) -> Rows:
    for lane, row in other.items():
        have = into.get(lane)
        if have is None:
            into[lane] = list(row)
            continue
        have[0] += row[0]
        have[1] += row[1]
        have[2] += row[2]
        have[3] = min(have[3], row[3])
        have[4] = max(have[4], row[4])
        have[5] = have[5] if have[5] is not None else row[5]
        have[6] = _min(have[6], row[6])
        have[7] = _min(have[7], row[7])
    return into


def reports(rows: Rows) -> list[LaneReport]:
    return [LaneReport(lane, r[0], r[1], r[2], max(0.0, r[4] - r[3]), r[5], r[6], r[7], r[3], r[4])
            for lane, r in rows.items()]


def describe(rows: Rows, top: int = 10) -> tuple[str, ...]:
    """One line per prefix, the busiest first: what it achieved and how it was paced."""
    ordered = sorted(reports(rows), key=lambda r: (-r.items, r.lane))
    lines = [r.describe() for r in ordered[:top]]
    if len(ordered) > top:
        lines.append(f"... {len(ordered) - top} more prefix(es)")
    return tuple(lines)


class PrefixAccumulator:
    """A Spark AccumulatorParam (duck-typed: pyspark is not imported here) merging `prefix_rows` per prefix."""

    def zero(self, value: Rows) -> Rows:
        return {}

    def addInPlace(self, value1: Rows, value2: Rows) -> Rows:  # noqa: N802 - Spark's name
        return merge(value1, value2)
