#!/usr/bin/env python
"""Validate every indexed checkpoint and savepoint (thin entry point).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/validate_checkpoints.py --warehouse s3://bucket/statekeeper \
        --roots s3://bucket/checkpoints,s3://bucket/savepoints --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment, never from the command line. The logic lives in statekeeper.validate.job;
docs/chains-and-validation.md documents the checks and tables (validation_results,
validation_jobs, validation_runs) and where the Great Expectations Data Docs go.

Exit status: see `--help` (statekeeper.jobs.registry.VALIDATE).
"""
from __future__ import annotations

import argparse
import sys

try:
    from statekeeper import entrypoint as ep
    from statekeeper.jobs.registry import VALIDATE, ExitCode
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc


def parser() -> argparse.ArgumentParser:
    p = ep.job_parser(
        VALIDATE,
        "Check every indexed snapshot: _metadata parses, every referenced file exists and is at least as long as "
        "stated (segments included), relative handles resolve beside _metadata (FLINK-39964), cross-directory "
        "dependencies (warnings). Reports per job the newest retained checkpoint, whether it restores, and the "
        "latest one that does; runs a Great Expectations suite over the index tables.")
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
    from statekeeper.storage import Roots, StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    storage = StorageConfig.from_env

    def preflight() -> None:
        Warehouse(args.warehouse, storage())
        if roots:
            Roots(roots)

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.validate.job import OK, UNRESTORABLE, ValidateCheckpoints

        result = (ep.common_options(ValidateCheckpoints(spark), args, storage()).roots(*roots)
                  .quality_suite(not args.no_quality_suite).stat_threads(args.stat_threads)).execute()
        code = {OK: ExitCode.OK, UNRESTORABLE: ExitCode.ATTENTION}.get(result.status, ExitCode.INTERNAL)
        return ep.JobOutcome(result.summary(), result.to_mapping(), code)

    return ep.run_job(args, VALIDATE, execute, preflight=preflight)


if __name__ == "__main__":
    sys.exit(main())
