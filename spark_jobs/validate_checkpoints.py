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
import json
import logging
import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_UNRESTORABLE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


def _ensure_library_on_path() -> None:
    # Under spark-submit without an installed package, import statekeeper from this checkout.
    include = Path(__file__).resolve().parent.parent / "include"
    try:
        import statekeeper  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(include))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(include), os.environ.get("PYTHONPATH")]))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="validate_checkpoints",
        description="Check every indexed snapshot: _metadata parses, every referenced file exists and is at "
                    "least as long as stated (segments included), relative handles resolve beside _metadata "
                    "(FLINK-39964), cross-directory dependencies (warnings). Reports per job the newest retained "
                    "checkpoint, whether it restores, and the latest one that does; runs a Great Expectations "
                    "suite over the index tables.",
        epilog="S3 settings come from the environment: STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
               "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, STATEKEEPER_S3_PATH_STYLE. Exit status: "
               "0 ok, 1 a job's newest retained checkpoint is not restorable, 2 usage/config error, "
               "3 internal failure (or the index failed its quality suite).")
    p.add_argument("--warehouse", required=True, help="where the Delta tables live: a local path or an s3:// prefix")
    p.add_argument("--roots", action="append", default=[], metavar="URI[,URI...]",
                   help="locations where referenced files outside the indexed roots may be stat'ed (usually the "
                        "index job's roots plus any other bucket/prefix snapshots point into); files outside "
                        "every root are reported as unverifiable errors")
    p.add_argument("--root", action="append", default=[], metavar="URI", help="one root (repeatable)")
    p.add_argument("--run-id", "--airflow-run-id", dest="airflow_run_id", default="",
                   help="the caller's run id (e.g. Airflow's run_id), recorded in validation_runs.airflow_run_id")
    p.add_argument("--engine", default="auto", choices=["auto", "delta-rs", "delta-spark"],
                   help="table engine (auto: delta-spark when its jars and extension are configured, else delta-rs)")
    p.add_argument("--no-quality-suite", action="store_true",
                   help="skip the Great Expectations suite over the index tables")
    p.add_argument("--stat-threads", type=int, default=8, help="concurrent stat requests per Spark task")
    p.add_argument("--result-json", default="", help="also write the run's result as JSON to this local file")
    p.add_argument("--master", default="", help="Spark master when not started by spark-submit (e.g. local[2])")
    return p


def _config_errors() -> tuple[type[BaseException], ...]:
    from statekeeper.chains.errors import MissingTableError
    from statekeeper.storage import RootConfigError, StorageConfigError
    from statekeeper.tables.errors import EngineUnavailableError, TableSchemaError, UnsupportedTableError

    return (MissingTableError, StorageConfigError, RootConfigError, EngineUnavailableError, TableSchemaError,
            UnsupportedTableError)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    roots = [r.strip() for group in args.roots for r in group.split(",") if r.strip()] + args.root
    if args.stat_threads < 1:
        parser().error("--stat-threads must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _ensure_library_on_path()
    log = logging.getLogger("statekeeper.validate")

    from statekeeper.storage import Roots, StorageConfig
    from statekeeper.tables.errors import TableError
    from statekeeper.tables.warehouse import Warehouse

    try:
        storage = StorageConfig.from_env()
        Warehouse(args.warehouse, storage)
        if roots:
            Roots(roots)
    except (*_config_errors(), TableError) as exc:
        log.error("configuration error: %s", exc)
        return EXIT_USAGE

    from pyspark.sql import SparkSession

    from statekeeper.tables.spark import configure_builder
    from statekeeper.validate.job import OK, UNRESTORABLE, ValidateCheckpoints

    spark = SparkSession.getActiveSession()
    owns_session = spark is None
    if spark is None:
        builder = SparkSession.builder.appName("statekeeper-validate")
        if args.master:
            builder = builder.master(args.master)
        spark = configure_builder(builder).getOrCreate()
    try:
        job = (ValidateCheckpoints(spark).warehouse(args.warehouse).roots(*roots).storage(storage)
               .engine(args.engine).airflow_run(args.airflow_run_id).quality_suite(not args.no_quality_suite)
               .stat_threads(args.stat_threads))
        try:
            result = job.execute()
        except _config_errors() as exc:
            log.error("configuration error: %s: %s", type(exc).__name__, exc)
            _write(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return EXIT_USAGE
        except Exception as exc:  # noqa: BLE001 - reported and turned into the exit status
            log.exception("validation run failed: %s: %s", type(exc).__name__, exc)
            _write(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return EXIT_INTERNAL
        print(result.summary(), flush=True)
        _write(args.result_json, result.to_mapping())
        if result.status == OK:
            return EXIT_OK
        if result.status == UNRESTORABLE:
            return EXIT_UNRESTORABLE
        return EXIT_INTERNAL
    finally:
        if owns_session:
            spark.stop()


def _write(path: str, payload: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
