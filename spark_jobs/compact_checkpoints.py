#!/usr/bin/env python
"""Move inline state out of bloated `_metadata` files, or maintain the warehouse (thin entry point).

Runs under spark-submit after index, chains and validate, against the same warehouse:

    spark-submit spark_jobs/compact_checkpoints.py --warehouse s3://bucket/statekeeper        # > 64 MiB
    spark-submit spark_jobs/compact_checkpoints.py --warehouse ... --snapshot s3://b/ck/<job>/chk-42 --dry-run
    spark-submit spark_jobs/compact_checkpoints.py --warehouse ... --snapshot ... --in-place   # stopped jobs only
    spark-submit spark_jobs/compact_checkpoints.py --warehouse ... --maintain-warehouse         # weekly

By default each result is a new snapshot directory, `<job dir>/compacted/chk-N/`, beside the source,
which is never modified; restore from it like from any retained checkpoint. The logic lives in
statekeeper.compact; docs/compaction.md documents the rules and the compactions table.

Exit status: see `--help` (statekeeper.jobs.registry.COMPACT).
"""
from __future__ import annotations

import argparse
import re
import sys

try:
    from statekeeper import entrypoint as ep
    from statekeeper.jobs.registry import COMPACT, ExitCode
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)
_UNIT = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
         "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def size(text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 4096, 64KiB, 64MiB, 1GiB")
    return int(float(m.group(1)) * _UNIT[(m.group(2) or "b").lower()])


def parser() -> argparse.ArgumentParser:
    p = ep.job_parser(
        COMPACT,
        "Select _metadata files larger than --max-metadata-size (or with a large inline share, or the --snapshot "
        "given) that hold state Flink inlined, move every inline payload of at least --min-bytes into a file, "
        "and write a verified, smaller _metadata: into a new snapshot directory <job dir>/compacted/chk-N/ (the "
        "default; the source is untouched) or, with --in-place, over the source of a stopped job (the original "
        "kept beside it as _metadata.statekeeper-original). Coordinator state, master state and in-memory "
        "changelog always stay inline. The log and the result report inline bytes per job and operator.")
    p.add_argument("--snapshot", action="append", default=[], metavar="URI",
                   help="compact only this snapshot (its directory or _metadata; repeatable or comma-separated). An "
                        "empty value (--snapshot=) is ignored")
    p.add_argument("--max-metadata-size", type=size, default=64 << 20, metavar="SIZE",
                   help="select every _metadata larger than this (default 64MiB)")
    p.add_argument("--max-inline-ratio", type=float, default=None, metavar="R",
                   help="also select a _metadata of at least 1 MiB whose inline share is at least R (0-1; default off)")
    p.add_argument("--min-bytes", type=size, default=1024, metavar="SIZE",
                   help="inline payloads smaller than this stay inline (default 1KiB: each moved payload is one object)")
    p.add_argument("--job-filter", default="", metavar="GLOB",
                   help="only job directories whose name matches this glob")
    p.add_argument("--in-place", nargs="?", const=True, default=False, type=ep.flag, metavar="BOOL",
                   help="replace the source _metadata itself (jobs that are not running: refused when the job "
                        "directory has an object newer than --quiet-period, or a newer chk-N appeared; also --in-place=true|false, "
                        "which the DAG's form uses)")
    p.add_argument("--quiet-period", default="1h", metavar="DURATION",
                   help="with --in-place: how long a job must have written nothing (default 1h; under 10m refused)")
    p.add_argument("--dry-run", nargs="?", const=True, default=False, type=ep.flag, metavar="BOOL",
                   help="parse and plan only: report what would move and the sizes after; write nothing (with "
                        "--maintain-warehouse: report what vacuum would delete; also --dry-run=true|false)")
    p.add_argument("--maintain-warehouse", action="store_true",
                   help="instead of compacting snapshots: compact the warehouse's own Delta tables (small files) and "
                        "vacuum versions older than --warehouse-retention (weekly)")
    p.add_argument("--warehouse-retention", default="7d", metavar="DURATION",
                   help="with --maintain-warehouse: keep files of table versions younger than this (default 7d); "
                        "refused when shorter than the age of a version a job still reads")
    return p


def options_from(args: argparse.Namespace):
    from statekeeper.compact.options import CompactMode, CompactOptions
    from statekeeper.compact.plan import Placement
    from statekeeper.gc.options import parse_duration

    if args.maintain_warehouse:
        mode = CompactMode.MAINTAIN_WAREHOUSE
    else:
        mode = CompactMode.DRY_RUN if args.dry_run else CompactMode.COMPACT
    return CompactOptions(
        mode=mode, placement=Placement.IN_PLACE if args.in_place else Placement.NEW_DIRECTORY,
        snapshots=ep.snapshots_from(args.snapshot),
        max_metadata_size=args.max_metadata_size, max_inline_ratio=args.max_inline_ratio, min_bytes=args.min_bytes,
        job_filter=args.job_filter or None, quiet_period=parse_duration(args.quiet_period, "--quiet-period"),
        warehouse_retention=parse_duration(args.warehouse_retention, "--warehouse-retention"),
        warehouse_dry_run=bool(args.dry_run and args.maintain_warehouse))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from statekeeper.storage import StorageConfig

    storage = StorageConfig.from_env
    holder: dict = {}

    def preflight() -> None:
        from statekeeper.tables.warehouse import Warehouse

        holder["options"] = options_from(args)
        holder["options"].check()
        Warehouse(args.warehouse, storage())

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.compact.job import CompactCheckpoints
        from statekeeper.tables.vocabulary import CompactionRunStatus

        result = ep.common_options(CompactCheckpoints(spark), args, storage()).configure(holder["options"]).execute()
        ok = result.status == CompactionRunStatus.SUCCEEDED
        return ep.JobOutcome(result.summary(), result.to_mapping(), ExitCode.OK if ok else ExitCode.ATTENTION)

    return ep.run_job(args, COMPACT, execute, preflight=preflight)


if __name__ == "__main__":
    sys.exit(main())
