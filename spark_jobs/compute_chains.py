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
import json
import logging
import os
import sys
from pathlib import Path

EXIT_OK = 0
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
        prog="compute_chains",
        description="From the index tables (snapshots, references, files), compute for every snapshot the "
                    "directories whose files it uses (own directory, own job, other jobs, savepoints, outside "
                    "the roots) with file counts and bytes, and its transitive lineage; write the tables "
                    "dependencies (by snapshot) and pins (by the directory kept alive) and a chains_runs row.",
        epilog="S3 settings come from the environment: STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
               "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, STATEKEEPER_S3_PATH_STYLE. Exit status: "
               "0 ok, 2 usage/config error, 3 internal failure.")
    p.add_argument("--warehouse", required=True, help="where the Delta tables live: a local path or an s3:// prefix")
    p.add_argument("--run-id", "--airflow-run-id", dest="airflow_run_id", default="",
                   help="the caller's run id (e.g. Airflow's run_id), recorded in chains_runs.airflow_run_id")
    p.add_argument("--engine", default="auto", choices=["auto", "delta-rs", "delta-spark"],
                   help="table engine (auto: delta-spark when its jars and extension are configured, else delta-rs)")
    p.add_argument("--max-depth", type=int, default=64,
                   help="fail if restore lineage is deeper than this many levels (default 64)")
    p.add_argument("--result-json", default="", help="also write the run's result as JSON to this local file")
    p.add_argument("--master", default="", help="Spark master when not started by spark-submit (e.g. local[2])")
    return p


def _config_errors() -> tuple[type[BaseException], ...]:
    from statekeeper.chains.errors import MissingTableError
    from statekeeper.storage import StorageConfigError
    from statekeeper.tables.errors import EngineUnavailableError, TableSchemaError, UnsupportedTableError

    return (MissingTableError, StorageConfigError, EngineUnavailableError, TableSchemaError, UnsupportedTableError)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.max_depth < 1:
        parser().error("--max-depth must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _ensure_library_on_path()
    log = logging.getLogger("statekeeper.chains")

    from statekeeper.storage import StorageConfig
    from statekeeper.tables.errors import TableError
    from statekeeper.tables.warehouse import Warehouse

    try:
        storage = StorageConfig.from_env()
        Warehouse(args.warehouse, storage)
    except (*_config_errors(), TableError) as exc:
        log.error("configuration error: %s", exc)
        return EXIT_USAGE

    from pyspark.sql import SparkSession

    from statekeeper.chains.job import ComputeChains
    from statekeeper.tables.spark import configure_builder

    spark = SparkSession.getActiveSession()
    owns_session = spark is None
    if spark is None:
        builder = SparkSession.builder.appName("statekeeper-chains")
        if args.master:
            builder = builder.master(args.master)
        spark = configure_builder(builder).getOrCreate()
    try:
        job = (ComputeChains(spark).warehouse(args.warehouse).storage(storage).engine(args.engine)
               .airflow_run(args.airflow_run_id).max_depth(args.max_depth))
        try:
            result = job.execute()
        except _config_errors() as exc:
            log.error("configuration error: %s: %s", type(exc).__name__, exc)
            _write(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return EXIT_USAGE
        except Exception as exc:  # noqa: BLE001 - reported and turned into the exit status
            log.exception("chains run failed: %s: %s", type(exc).__name__, exc)
            _write(args.result_json, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return EXIT_INTERNAL
        print(result.summary(), flush=True)
        _write(args.result_json, result.to_mapping())
        return EXIT_OK
    finally:
        if owns_session:
            spark.stop()


def _write(path: str, payload: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
