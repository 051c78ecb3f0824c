"""The report job's command line, shared by `spark_jobs/build_report.py` (spark-submit, the DAG's
`report` task) and `statekeeper report` (a local Spark session)."""
from __future__ import annotations

import argparse

from statekeeper.launch import entrypoint as ep
from statekeeper.registry import REPORT
from statekeeper.report.options import ReportOptions

DESCRIPTION = (
    "Write the warehouse's report: one self-contained HTML page (storage per job: own, pinned by other jobs, "
    "reclaimable, inline in _metadata, and its trend; the lineage graph of jobs and savepoints; per job the newest "
    "checkpoint, whether it restores and the latest that does, the last verified DR copy; _metadata size and inline "
    "state; GC, DR and compaction outcomes) under <warehouse>/_reports/runs/<run>/, then point "
    "<warehouse>/_reports/latest.json at it. Reads the tables only; needs a succeeded index run.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="", metavar="DIR",
                   help="also write the page to this local directory (index.html, report.json)")
    p.add_argument("--inactive-after", default="7d", metavar="DURATION",
                   help="list job directories with no checkpoint newer than this as idle, with the live jobs that "
                        "still use their files (default 7d; the GC's --inactive-after reclaims what nothing uses)")


def options(args: argparse.Namespace) -> ReportOptions:
    from statekeeper.units import parse_duration

    return ReportOptions(out=args.out or None, inactive_after=parse_duration(args.inactive_after, "--inactive-after"))


# Exit 0 whatever the page shows: a store with unrestorable jobs still gets its report.
ENTRY = ep.JobEntry(REPORT, DESCRIPTION, add_arguments, options)
