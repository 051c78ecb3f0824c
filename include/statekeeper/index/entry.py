"""The index job's command line: `spark_jobs/index_checkpoints.py`."""
from __future__ import annotations

import argparse
from datetime import datetime

from statekeeper.launch import entrypoint as ep
from statekeeper.index.options import IndexOptions
from statekeeper.registry import INDEX, ExitCode

DESCRIPTION = (
    "Index every object and every _metadata under Flink checkpoint/savepoint roots into Delta tables (files, "
    "snapshots, references, inline_state, index_runs). Incremental: unchanged _metadata are not re-parsed; "
    "re-runs without storage changes leave the tables unchanged.")


def _timestamp(text: str) -> datetime | None:
    if not text or text in ("None", "null"):
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"timestamp {text!r} needs a time zone (e.g. +00:00)")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    ep.add_root_arguments(p, "checkpoint base dirs (<root>/<job-id>/chk-N) or savepoint base dirs; file:// "
                             "paths, plain absolute paths, s3://, oss://, gs:// or abfss:// (abfs/wasb/wasbs) URIs")
    p.add_argument("--parallelism", type=int, default=None,
                   help="number of Spark tasks (default: 4 x the default parallelism)")
    p.add_argument("--job-filter", default="", help="only job directories whose name matches this glob")
    p.add_argument("--data-interval-start", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--data-interval-end", type=_timestamp, default=None, help="ISO-8601 with time zone")
    p.add_argument("--allow-partial", action="store_true", help="exit 0 even when some units could not be listed")
    ep.add_flag(p, "--allow-empty-root",
                "index an s3:// root with no object under it as empty instead of refusing it as a likely "
                "typo (also --allow-empty-root=true|false, which the DAG's form uses)")


def options(args: argparse.Namespace) -> IndexOptions:
    roots = ep.roots_from(args)
    if not roots:
        raise ep.UsageError("give at least one root (--roots or --root)")
    if args.parallelism is not None and args.parallelism < 1:
        raise ep.UsageError("--parallelism must be >= 1")
    return IndexOptions(roots=tuple(roots), parallelism=args.parallelism, job_filter=args.job_filter or None,
                        allow_empty_root=args.allow_empty_root, data_interval_start=args.data_interval_start,
                        data_interval_end=args.data_interval_end)


def exit_code(result: object, args: argparse.Namespace) -> ExitCode:
    # A partial listing is often transient (the DAG retries exit 1), unless the caller accepts it.
    from statekeeper.tables.vocabulary import IndexRunStatus

    return ExitCode.ATTENTION if result.status == IndexRunStatus.PARTIAL and not args.allow_partial else ExitCode.OK


# The index creates the warehouse: its roots and storage are checked by the run itself.
ENTRY = ep.JobEntry(INDEX, DESCRIPTION, add_arguments, options, exit_code)
