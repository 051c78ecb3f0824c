#!/usr/bin/env python
"""Copy each job's latest restorable checkpoint (and savepoints) to disaster-recovery roots (thin entry point).

Runs under spark-submit after index, chains and validate, against the same warehouse:

    spark-submit spark_jobs/copy_to_dr.py --warehouse s3://bucket/statekeeper \\
        --target s3://dr-bucket/flink --allowed-targets s3://dr-bucket/
    spark-submit spark_jobs/copy_to_dr.py --warehouse ... --target s3://src/checkpoints=s3://dr/checkpoints \\
        --target s3://src/savepoints=s3://dr/savepoints --allowed-targets s3://dr/ --verify checksum
    spark-submit spark_jobs/copy_to_dr.py --warehouse ... --mode verify ...     # re-verify the copies

Files first (concurrently, in Spark tasks), then each snapshot's rewritten `_metadata`, written last and
only once every object it names is verified at the target. The DR store's S3 settings come from the
STATEKEEPER_DR_* variables (STATEKEEPER_DR_S3_ENDPOINT, STATEKEEPER_DR_AWS_ACCESS_KEY_ID, ...); without
them the targets are reached with the source's settings. The logic lives in statekeeper.replicate;
docs/dr-copy.md documents the rules and the dr_copies table.

Exit status: see `--help` (statekeeper.jobs.registry.DR).
"""
from __future__ import annotations

import argparse
import sys

try:
    from statekeeper import entrypoint as ep
    from statekeeper.jobs.registry import DR, ExitCode
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc


def parser() -> argparse.ArgumentParser:
    p = ep.job_parser(
        DR,
        "Copy each job's latest restorable checkpoint (per validation_jobs), savepoints by policy, or the given "
        "--snapshot, with every file it references (own, other jobs' and savepoints' shared files, segments, "
        "channel state), to the target roots; rewrite its _metadata so every absolute path points at the target; "
        "verify; write the _metadata last. The source is never modified. Re-runs copy only what is missing.")
    p.add_argument("--target", action="append", default=[], metavar="BASE | SOURCE_ROOT=TARGET_ROOT",
                   help="where each indexed root goes: SOURCE_ROOT=TARGET_ROOT (repeatable), and/or one BASE below "
                        "which every other root is mirrored by its path below the roots' common directory")
    p.add_argument("--allowed-targets", action="append", default=[], metavar="URI[,URI...]",
                   help="the allowlist: targets must lie below one of these prefixes (the DAG passes the Variable "
                        "statekeeper_dr_allowed_targets); required")
    p.add_argument("--mode", choices=["copy", "verify"], default="copy",
                   help="copy (default), or verify: re-check the newest verified copies at the target, copy nothing")
    p.add_argument("--savepoints", choices=["none", "newest", "all"], default="newest",
                   help="savepoints to copy besides each job's latest restorable checkpoint (default newest: the "
                        "newest restorable savepoint per job)")
    p.add_argument("--snapshot", action="append", default=[], metavar="URI",
                   help="copy only this snapshot (its directory or _metadata; repeatable or comma-separated): an "
                        "ad-hoc copy. An empty value (--snapshot=, what the DAG passes when none is given) is "
                        "ignored: without a non-empty one, the usual selection")
    p.add_argument("--job-filter", default="", metavar="GLOB",
                   help="only job (and savepoint) directories whose name matches this glob")
    p.add_argument("--include-external", nargs="?", const=True, default=False, type=ep.flag, metavar="BOOL",
                   help="also copy referenced files outside the indexed roots (below <target>/_external/); without "
                        "it a snapshot that references one is refused (also --include-external=true|false, which "
                        "the DAG's form uses)")
    p.add_argument("--verify", choices=["size", "checksum"], default="size",
                   help="size (default): what this run wrote exists at the target with the source's size; "
                        "checksum: also compare SHA-256 of the source with the target's bytes. Either way an object "
                        "already at the target is skipped only on proof that it holds the source's bytes (its "
                        "version recorded in dr_files, or an equal content hash), else copied again")
    p.add_argument("--copies-in-flight", type=int, default=16, metavar="N",
                   help="concurrent copies per Spark task (default 16)")
    p.add_argument("--max-fallbacks", type=int, default=2, metavar="N",
                   help="older restorable checkpoints of a job to try when its copy fails because a running job "
                        "subsumed the checkpoint mid-copy (default 2)")
    p.add_argument("--max-copies-per-second", type=float, default=None, metavar="R",
                   help="limit for the whole run, shared by its tasks (default: unlimited); keeps a DR copy from "
                        "crowding out the jobs that write checkpoints")
    return p


def options_from(args: argparse.Namespace):
    from statekeeper.replicate.options import (DrMode, DrOptions, SavepointPolicy, TargetSpec, VerifyMode,
                                               parse_allowed)

    return DrOptions(targets=TargetSpec.parse(args.target), allowed_targets=parse_allowed(args.allowed_targets),
                     mode=DrMode(args.mode), savepoints=SavepointPolicy(args.savepoints),
                     snapshots=ep.snapshots_from(args.snapshot),
                     job_filter=args.job_filter or None, include_external=args.include_external,
                     verify=VerifyMode(args.verify), copies_in_flight=args.copies_in_flight,
                     max_fallbacks=args.max_fallbacks, max_copies_per_second=args.max_copies_per_second)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from statekeeper.storage import StorageConfig

    storage = StorageConfig.from_env
    holder: dict = {}

    def preflight() -> None:
        from statekeeper.tables.warehouse import Warehouse

        holder["options"] = options_from(args)
        holder["options"].check()
        StorageConfig.target_from_env()
        Warehouse(args.warehouse, storage())

    def execute(spark) -> ep.JobOutcome:
        from statekeeper.replicate.job import CopyToDr
        from statekeeper.tables.vocabulary import DrRunStatus

        result = (ep.common_options(CopyToDr(spark), args, storage()).configure(holder["options"])
                  .target_storage(StorageConfig.target_from_env()).execute())
        ok = result.status == DrRunStatus.SUCCEEDED
        return ep.JobOutcome(result.summary(), result.to_mapping(), ExitCode.OK if ok else ExitCode.ATTENTION)

    return ep.run_job(args, DR, execute, preflight=preflight)


if __name__ == "__main__":
    sys.exit(main())
