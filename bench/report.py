"""Rendering the report page of a large store, against a small one in the same run.

    python -m bench report [--jobs 1000] [--snapshots-per-job 50] [--repeat 5]

The data is synthetic (tests/report/synthetic.py), cut as the report job cuts it (top N with
totals), so this measures what grows with the store on the rendering side: charts, the lineage
layout (Graphviz `dot`) and the template. The Spark side (the aggregates) is measured at 100k..1M
objects by `python -m bench scale --steps index,chains,validate,gc,report`.
Baseline: the same render for a 10-job store. Prints medians, the ratio and the page size.
"""
from __future__ import annotations

import argparse
import statistics
import time

NAME = "report"
DESCRIPTION = "render the report page of a 1,000-job / 50,000-snapshot store vs a 10-job one (ratio)"


def _median_seconds(fn, repeat: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times), size


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m bench report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--snapshots-per-job", type=int, default=50)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    from statekeeper.report.render import render
    from tests.report.synthetic import synthetic_report

    render(synthetic_report(jobs=10, snapshots_per_job=5))   # imports, fonts, template compile: not measured
    small = synthetic_report(jobs=10, snapshots_per_job=5)
    t = time.perf_counter()
    large = synthetic_report(jobs=args.jobs, snapshots_per_job=args.snapshots_per_job)
    built = time.perf_counter() - t
    base, base_size = _median_seconds(lambda: render(small), args.repeat)
    big, big_size = _median_seconds(lambda: render(large), args.repeat)
    print(f"store: {args.jobs} jobs, {args.jobs * args.snapshots_per_job} snapshots (synthetic data built in {built:.2f}s)")
    print(f"{'':28}{'median':>10}{'page':>12}")
    print(f"{'baseline: 10-job store':28}{base:>9.3f}s{base_size / 1024:>10.0f} KiB")
    print(f"{f'{args.jobs}-job store':28}{big:>9.3f}s{big_size / 1024:>10.0f} KiB")
    print(f"ratio (large / baseline): {big / base:.2f}x")
    return 0
