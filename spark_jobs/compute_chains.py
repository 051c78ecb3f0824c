#!/usr/bin/env python
"""Compute reference chains across jobs into Delta tables (thin entry point).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/compute_chains.py --warehouse s3://bucket/statekeeper --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, STATEKEEPER_S3_ENDPOINT, ...), never from the
command line. The logic lives in statekeeper.chains.job; docs/chains-and-validation.md documents
the tables (dependencies, pins, chains_runs).

Exit status: 0 tables written (also when some `_metadata` could not be parsed: the run is then
recorded as "incomplete" and the summary says so; GC refuses to act on it); 2 usage or
configuration error (bad arguments, no index tables in the warehouse, bad storage settings);
3 internal failure (nothing was committed to dependencies/pins by this run).
"""
from __future__ import annotations

import argparse
import logging
import sys

try:
    from statekeeper import entrypoint as ep
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compute_chains",
        description="From the index tables (snapshots, references, files), compute for every snapshot the "
                    "directories whose files it uses (own directory, own job, other jobs, savepoints, outside "
                    "the roots) with file counts and bytes, and its transitive lineage; write the tables "
                    "dependencies (by snapshot) and pins (by the directory kept alive) and a chains_runs row.",
        epilog=ep.S3_EPILOG)
    ep.add_common_arguments(p, audit_table="chains_runs")
    p.add_argument("--max-depth", type=int, default=64,
                   help="fail if restore lineage is deeper than this many levels (default 64)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.max_depth < 1:
        parser().error("--max-depth must be >= 1")
    ep.configure_logging()
    log = logging.getLogger("statekeeper.chains")

    from statekeeper.storage import StorageConfig
    from statekeeper.tables.errors import TableError
    from statekeeper.tables.warehouse import Warehouse

    config_errors = ep.table_config_errors()
    try:  # before Spark starts: a wrong warehouse should answer in a second, not after JVM start-up
        storage = StorageConfig.from_env()
        Warehouse(args.warehouse, storage)
    except (*config_errors, TableError) as exc:
        log.error("configuration error: %s", exc)
        return ep.EXIT_USAGE

    from statekeeper.chains.job import ComputeChains

    def execute(spark) -> ep.JobOutcome:
        result = (ComputeChains(spark).warehouse(args.warehouse).storage(storage).engine(args.engine)
                  .airflow_run(args.airflow_run_id)
                  .progress_interval(args.progress_interval).max_depth(args.max_depth)).execute()
        return ep.JobOutcome(result.summary(), result.to_mapping(), ep.EXIT_OK)

    return ep.run_job(args, app_name="statekeeper-chains", log=log, config_errors=config_errors, execute=execute)


if __name__ == "__main__":
    sys.exit(main())
