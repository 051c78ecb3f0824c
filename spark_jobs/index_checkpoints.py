#!/usr/bin/env python
"""Index Flink checkpoints and savepoints into Delta tables (thin entry point).

Runs under spark-submit:

    spark-submit spark_jobs/index_checkpoints.py --roots s3://bucket/checkpoints,s3://bucket/savepoints \
        --warehouse s3://bucket/statekeeper

and from Python (`main([...])`, reusing an active SparkSession). S3 credentials and endpoint come
from the environment, never from the command line. The logic lives in statekeeper.index.job;
docs/tables.md documents the tables written.

Exit status: see `--help` (statekeeper.jobs.registry.INDEX).
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime

try:
    from statekeeper import entrypoint as ep
    from statekeeper.jobs.registry import INDEX, ExitCode
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc


def _timestamp(text: str) -> datetime | None:
    if not text or text in ("None", "null"):
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"timestamp {text!r} needs a time zone (e.g. +00:00)")
    return value


def parser() -> argparse.ArgumentParser:
    p = ep.job_parser(
        INDEX,
        "Index every object and every _metadata under Flink checkpoint/savepoint roots into Delta tables (files, "
        "snapshots, references, inline_state, index_runs). Incremental: unchanged _metadata are not re-parsed; "
        "re-runs without storage changes leave the tables unchanged.")
    ep.add_root_arguments(p, "checkpoint base dirs (<root>/<job-id>/chk-N) or savepoint base dirs; file:// "
                             "paths, plain absolute paths, s3://, oss://, gs:// or abfss:// (abfs/wasb/wasbs) URIs")
    p.add_argument("--parallelism", type=int, default=None,
                   help="number of Spark tasks (default: 4 x the default parallelism)")
    p.add_argument("--job-filter", default="", help="only job directories whose name matches this glob")
    p.add_argument("--data-interval-start", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--data-interval-end", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--allow-partial", action="store_true", help="exit 0 even when some units could not be listed")
    p.add_argument("--allow-empty-root", nargs="?", const=True, default=False, type=ep.flag, metavar="BOOL",
                   help="index an s3:// root with no object under it as empty instead of refusing it as a likely "
                        "typo (also --allow-empty-root=true|false, which the DAG's form uses)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    roots = ep.roots_from(args)
    if not roots:
        parser().error("give at least one root (--roots or --root)")
    if args.parallelism is not None and args.parallelism < 1:
        parser().error("--parallelism must be >= 1")

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.index.job import PARTIAL, IndexCheckpoints
        from statekeeper.storage import StorageConfig

        job = (ep.common_options(IndexCheckpoints(spark), args, StorageConfig.from_env()).roots(*roots)
               .job_filter(args.job_filter)
               .airflow_run(args.airflow_run_id, args.data_interval_start, args.data_interval_end)
               .allow_empty_root(args.allow_empty_root))
        if args.parallelism:
            job = job.parallelism(args.parallelism)
        result = job.execute()
        for line in result.errors[:20]:
            job.log.warning("%s", line)
        attention = result.status == PARTIAL and not args.allow_partial
        return ep.JobOutcome(result.summary(), result.to_mapping(), ExitCode.ATTENTION if attention else ExitCode.OK)

    return ep.run_job(args, INDEX, execute)


if __name__ == "__main__":
    sys.exit(main())
