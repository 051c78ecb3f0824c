#!/usr/bin/env python
"""Compute reference chains across jobs into Delta tables (thin entry point).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/compute_chains.py --warehouse s3://bucket/statekeeper --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, STATEKEEPER_S3_ENDPOINT, ...), never from the
command line. The logic lives in statekeeper.chains.job; docs/chains-and-validation.md documents
the tables (dependencies, pins, chains_runs).

Exit status: see `--help` (statekeeper.jobs.registry.CHAINS).
"""
from __future__ import annotations

import argparse
import sys

try:
    from statekeeper import entrypoint as ep
    from statekeeper.jobs.registry import CHAINS, ExitCode
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc


def parser() -> argparse.ArgumentParser:
    p = ep.job_parser(
        CHAINS,
        "From the index tables (snapshots, references, files), compute for every snapshot the directories whose "
        "files it uses (own directory, own job, other jobs, savepoints, outside the roots) with file counts and "
        "bytes, and its transitive lineage; write the tables dependencies (by snapshot) and pins (by the "
        "directory kept alive) and a chains_runs row.")
    p.add_argument("--max-depth", type=int, default=64,
                   help="fail if restore lineage is deeper than this many levels (default 64)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.max_depth < 1:
        parser().error("--max-depth must be >= 1")
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    storage = StorageConfig.from_env

    def preflight() -> None:
        Warehouse(args.warehouse, storage())

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.chains.job import ComputeChains

        result = ep.common_options(ComputeChains(spark), args, storage()).max_depth(args.max_depth).execute()
        return ep.JobOutcome(result.summary(), result.to_mapping(), ExitCode.OK)

    return ep.run_job(args, CHAINS, execute, preflight=preflight)


if __name__ == "__main__":
    sys.exit(main())
