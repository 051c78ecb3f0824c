#!/usr/bin/env python
"""Index Flink checkpoints and savepoints into Delta tables (thin entry point).

Runs under spark-submit:

    spark-submit spark_jobs/index_checkpoints.py --roots s3://bucket/checkpoints,s3://bucket/savepoints \
        --warehouse s3://bucket/statekeeper

and from Python (`main([...])`, reusing an active SparkSession). S3 credentials and endpoint come
from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, STATEKEEPER_S3_ENDPOINT, ...), never
from the command line, where they would show in process listings. The logic lives in
statekeeper.index.job; see docs/tables.md for the tables written.

Exit status: 0 succeeded; 3 partial (some job directories could not be listed; their previous
rows were kept; pass --allow-partial to exit 0); 1 failed (nothing committed).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path


def _ensure_library_on_path() -> None:
    # Under spark-submit without an installed package, import statekeeper from this checkout.
    include = Path(__file__).resolve().parent.parent / "include"
    try:
        import statekeeper  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(include))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(include), os.environ.get("PYTHONPATH")]))


def _timestamp(text: str) -> datetime | None:
    if not text or text in ("None", "null"):
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"timestamp {text!r} needs a time zone (e.g. +00:00)")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="index_checkpoints",
        description="Index every object and every _metadata under Flink checkpoint/savepoint roots into Delta "
                    "tables (files, snapshots, references, inline_state, index_runs). Incremental: unchanged "
                    "_metadata are not re-parsed; re-runs without storage changes leave the tables unchanged.",
        epilog="S3 settings come from the environment: STATEKEEPER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
               "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, STATEKEEPER_S3_PATH_STYLE.")
    p.add_argument("--roots", action="append", default=[], metavar="URI[,URI...]",
                   help="checkpoint base dirs (<root>/<job-id>/chk-N) or savepoint base dirs; file:// paths, "
                        "plain absolute paths or s3:// URIs; comma-separated and/or repeated")
    p.add_argument("--root", action="append", default=[], metavar="URI", help="one root (repeatable)")
    p.add_argument("--warehouse", required=True, help="where the Delta tables live: a local path or an s3:// prefix")
    p.add_argument("--engine", default="auto", choices=["auto", "delta-rs", "delta-spark"],
                   help="table engine (auto: delta-spark when its jars and extension are configured, else delta-rs)")
    p.add_argument("--parallelism", type=int, default=None,
                   help="number of Spark tasks (default: 4 x the default parallelism)")
    p.add_argument("--job-filter", default="", help="only job directories whose name matches this glob")
    p.add_argument("--run-id", "--airflow-run-id", dest="airflow_run_id", default="",
                   help="the caller's run id (e.g. Airflow's run_id), recorded in index_runs.airflow_run_id")
    p.add_argument("--data-interval-start", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--data-interval-end", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--progress-interval", type=float, default=10.0, help="seconds between progress log lines")
    p.add_argument("--result-json", default="", help="also write the run's result as JSON to this local file")
    p.add_argument("--allow-partial", action="store_true", help="exit 0 even when some units could not be listed")
    p.add_argument("--master", default="", help="Spark master when not started by spark-submit (e.g. local[2])")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    roots = [r for group in args.roots for r in group.split(",") if r.strip()] + args.root
    if not roots:
        parser().error("give at least one root (--roots or --root)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _ensure_library_on_path()

    from pyspark.sql import SparkSession

    from statekeeper.index.job import FAILED, PARTIAL, IndexCheckpoints
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.spark import configure_builder

    spark = SparkSession.getActiveSession()
    owns_session = spark is None
    if spark is None:
        builder = SparkSession.builder.appName("statekeeper-index")
        if args.master:
            builder = builder.master(args.master)
        spark = configure_builder(builder).getOrCreate()
    log = logging.getLogger("statekeeper.index")
    try:
        job = (IndexCheckpoints(spark)
               .roots(*roots)
               .warehouse(args.warehouse)
               .storage(StorageConfig.from_env())
               .engine(args.engine)
               .job_filter(args.job_filter)
               .airflow_run(args.airflow_run_id, args.data_interval_start, args.data_interval_end)
               .progress_interval(args.progress_interval))
        if args.parallelism:
            job = job.parallelism(args.parallelism)
        try:
            result = job.execute()
        except Exception as exc:  # noqa: BLE001 - reported and turned into the exit status
            log.error("index run failed: %s: %s", type(exc).__name__, exc)
            if args.result_json:
                Path(args.result_json).write_text(json.dumps({"status": FAILED, "error": f"{type(exc).__name__}: {exc}"}))
            return 1
        print(result.summary(), flush=True)
        for line in result.errors[:20]:
            log.warning("%s", line)
        if args.result_json:
            Path(args.result_json).write_text(json.dumps(result.to_mapping(), indent=2))
        if result.status == PARTIAL and not args.allow_partial:
            return 3
        return 0
    finally:
        if owns_session:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
