#!/usr/bin/env python
"""Validate every indexed checkpoint and savepoint (thin entry point).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/validate_checkpoints.py --warehouse s3://bucket/statekeeper \
        --roots s3://bucket/checkpoints,s3://bucket/savepoints --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment, never from the command line. The logic lives in statekeeper.validate.job;
docs/chains-and-validation.md documents the checks and tables (validation_results,
validation_jobs, validation_runs) and where the Great Expectations Data Docs go.

Exit status:
  0  every job's newest retained checkpoint is restorable (warnings never fail the run);
  1  some job's newest retained checkpoint is not: the summary names the jobs and snapshots and
     the latest restorable checkpoint of each;
  2  usage or configuration error (bad arguments, no index tables, invalid roots or storage settings);
  3  internal failure, including an index that fails its quality suite (its answers cannot be trusted).
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
        prog="validate_checkpoints",
        description="Check every indexed snapshot: _metadata parses, every referenced file exists and is at "
                    "least as long as stated (segments included), relative handles resolve beside _metadata "
                    "(FLINK-39964), cross-directory dependencies (warnings). Reports per job the newest retained "
                    "checkpoint, whether it restores, and the latest one that does; runs a Great Expectations "
                    "suite over the index tables.",
        epilog=ep.S3_EPILOG + " Here 1 means a job's newest retained checkpoint is not restorable; 3 includes "
                              "an index that fails its quality suite.")
    ep.add_common_arguments(p, audit_table="validation_runs")
    ep.add_root_arguments(p, "locations where referenced files outside the indexed roots may be stat'ed (usually "
                             "the index job's roots plus any other bucket/prefix snapshots point into); files "
                             "outside every root are reported as unverifiable errors")
    p.add_argument("--no-quality-suite", action="store_true",
                   help="skip the Great Expectations suite over the index tables")
    p.add_argument("--stat-threads", type=int, default=8, help="concurrent stat requests per Spark task")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    roots = ep.roots_from(args)
    if args.stat_threads < 1:
        parser().error("--stat-threads must be >= 1")
    ep.configure_logging()
    log = logging.getLogger("statekeeper.validate")

    from statekeeper.storage import Roots, StorageConfig
    from statekeeper.tables.errors import TableError
    from statekeeper.tables.warehouse import Warehouse

    config_errors = ep.table_config_errors()
    try:  # before Spark starts: a wrong warehouse or root should answer in a second
        storage = StorageConfig.from_env()
        Warehouse(args.warehouse, storage)
        if roots:
            Roots(roots)
    except (*config_errors, TableError) as exc:
        log.error("configuration error: %s", exc)
        return ep.EXIT_USAGE

    from statekeeper.validate.job import OK, UNRESTORABLE, ValidateCheckpoints

    def execute(spark) -> ep.JobOutcome:
        result = (ValidateCheckpoints(spark).warehouse(args.warehouse).roots(*roots).storage(storage)
                  .engine(args.engine).airflow_run(args.airflow_run_id)
                  .progress_interval(args.progress_interval).quality_suite(not args.no_quality_suite)
                  .stat_threads(args.stat_threads)).execute()
        code = {OK: ep.EXIT_OK, UNRESTORABLE: ep.EXIT_ATTENTION}.get(result.status, ep.EXIT_INTERNAL)
        return ep.JobOutcome(result.summary(), result.to_mapping(), code)

    return ep.run_job(args, app_name="statekeeper-validate", log=log, config_errors=config_errors,
                      execute=execute)


if __name__ == "__main__":
    sys.exit(main())
