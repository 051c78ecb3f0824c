"""The report job's command line, shared by `spark_jobs/build_report.py` (spark-submit, the DAG's
`report` task) and `statekeeper report` (a local Spark session)."""
from __future__ import annotations

import argparse

from statekeeper import entrypoint as ep
from statekeeper.jobs.registry import REPORT, ExitCode

DESCRIPTION = (
    "Write the warehouse's report: one self-contained HTML page (storage per job: own, pinned by other jobs, "
    "reclaimable, inline in _metadata, and its trend; the lineage graph of jobs and savepoints; per job the newest "
    "checkpoint, whether it restores and the latest that does, the last verified DR copy; _metadata size and inline "
    "state; GC, DR and compaction outcomes) under <warehouse>/_reports/runs/<run>/, then point "
    "<warehouse>/_reports/latest.json at it. Reads the tables only; needs a succeeded index run.")


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = ep.job_parser(REPORT, DESCRIPTION)
    if prog:
        p.prog = prog
    p.add_argument("--out", default="", metavar="DIR",
                   help="also write the page to this local directory (index.html, report.json)")
    return p


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    args = parser(prog).parse_args(argv)
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    storage = StorageConfig.from_env

    def preflight() -> None:
        Warehouse(args.warehouse, storage())

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.report.job import BuildReport

        result = ep.common_options(BuildReport(spark), args, storage()).out(args.out).execute()
        return ep.JobOutcome(result.summary(), result.to_mapping(), ExitCode.OK)

    return ep.run_job(args, REPORT, execute, preflight=preflight)
