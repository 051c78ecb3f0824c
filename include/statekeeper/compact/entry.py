"""The compaction job's command line: `spark_jobs/compact_checkpoints.py`."""
from __future__ import annotations

import argparse
from typing import Any

from statekeeper.launch import entrypoint as ep
from statekeeper.compact.options import CompactMode, CompactOptions
from statekeeper.compact.plan import Placement
from statekeeper.defaults import COMPACT_MAX_METADATA_SIZE, COMPACT_MAX_METADATA_SIZE_TEXT
from statekeeper.registry import COMPACT, ExitCode
from statekeeper.units import parse_duration, parse_size

DESCRIPTION = (
    "Select _metadata files larger than --max-metadata-size (or with a large inline share, or the --snapshot "
    "given) that hold state Flink inlined, move every inline payload of at least --min-bytes into a file, "
    "and write a verified, smaller _metadata: into a new snapshot directory <job dir>/compacted/chk-N/ (the "
    "default; the source is untouched) or, with --in-place, over the source of a stopped job (the original "
    "kept beside it as _metadata.statekeeper-original). Coordinator state, master state and in-memory "
    "changelog always stay inline. The log and the result report inline bytes per job and operator.")

size = ep.argtype(parse_size, "size")


def add_arguments(p: argparse.ArgumentParser) -> None:
    ep.add_snapshot_argument(p, "compact only this snapshot (its directory or _metadata; repeatable or comma-separated). An "
                             "empty value (--snapshot=) is ignored")
    p.add_argument("--max-metadata-size", type=size, default=COMPACT_MAX_METADATA_SIZE, metavar="SIZE",
                   help=f"select every _metadata larger than this (default {COMPACT_MAX_METADATA_SIZE_TEXT})")
    p.add_argument("--max-inline-ratio", type=float, default=None, metavar="R",
                   help="also select a _metadata of at least 1 MiB whose inline share is at least R (0-1; default off)")
    p.add_argument("--min-bytes", type=size, default=1024, metavar="SIZE",
                   help="inline payloads smaller than this stay inline (default 1KiB: each moved payload is one object)")
    ep.add_job_filter(p, "job directories")
    ep.add_flag(p, "--in-place",
                "replace the source _metadata itself (jobs that are not running: refused when the job "
                "directory has an object newer than --quiet-period, or a newer chk-N appeared; also --in-place=true|false, "
                "which the DAG's form uses)")
    p.add_argument("--quiet-period", default="1h", metavar="DURATION",
                   help="with --in-place: how long a job must have written nothing (default 1h; under 10m refused)")
    ep.add_flag(p, "--dry-run",
                "parse and plan only: report what would move and the sizes after; write nothing (also "
                "--dry-run=true|false)")


def options(args: argparse.Namespace) -> CompactOptions:
    return CompactOptions(
        mode=CompactMode.DRY_RUN if args.dry_run else CompactMode.COMPACT,
        placement=Placement.IN_PLACE if args.in_place else Placement.NEW_DIRECTORY,
        snapshots=ep.snapshots_from(args.snapshot),
        max_metadata_size=args.max_metadata_size, max_inline_ratio=args.max_inline_ratio, min_bytes=args.min_bytes,
        job_filter=args.job_filter or None, quiet_period=parse_duration(args.quiet_period, "--quiet-period"))


def exit_code(result: Any, args: argparse.Namespace) -> ExitCode:
    from statekeeper.tables.vocabulary import CompactionRunStatus

    return ExitCode.OK if result.status == CompactionRunStatus.SUCCEEDED else ExitCode.ATTENTION


ENTRY = ep.JobEntry(COMPACT, DESCRIPTION, add_arguments, options, exit_code)
