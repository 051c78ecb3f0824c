"""The DR copy job's command line: `spark_jobs/copy_to_dr.py`."""
from __future__ import annotations

import argparse
from typing import Any

from statekeeper.launch import entrypoint as ep
from statekeeper.registry import DR, ExitCode
from statekeeper.replicate.options import DrMode, DrOptions, SavepointPolicy, TargetSpec, VerifyMode, parse_allowed

DESCRIPTION = (
    "Copy each job's latest restorable checkpoint (per validation_jobs), savepoints by policy, or the given "
    "--snapshot, with every file it references (own, other jobs' and savepoints' shared files, segments, "
    "channel state), to the target roots; rewrite its _metadata so every absolute path points at the target; "
    "verify; write the _metadata last. The source is never modified. Re-runs copy only what is missing.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", default=[], metavar="BASE | SOURCE_ROOT=TARGET_ROOT",
                   help="where each indexed root goes: SOURCE_ROOT=TARGET_ROOT (repeatable), and/or one BASE below "
                        "which every other root is mirrored by its path below the roots' common directory")
    p.add_argument("--allowed-targets", action="append", default=[], metavar="URI[,URI...]",
                   help="the allowlist: targets must lie below one of these prefixes (the DAG passes the Variable "
                        "statekeeper_dr_allowed_targets); required")
    p.add_argument("--mode", choices=["copy", "verify", "follow"], default="copy",
                   help="copy (default); verify: re-check the newest verified copies at the target, copy nothing; "
                        "follow: copy each job's newest completed checkpoint since its last verified copy, found "
                        "by listing the indexed roots and parsing its _metadata (no index, chains or validation run "
                        "needed; savepoints are left to the nightly copy)")
    p.add_argument("--savepoints", choices=["none", "newest", "all"], default="newest",
                   help="savepoints to copy besides each job's latest restorable checkpoint (default newest: the "
                        "newest restorable savepoint per job)")
    ep.add_snapshot_argument(p, "copy only this snapshot (its directory or _metadata; repeatable or comma-separated): an "
                             "ad-hoc copy. An empty value (--snapshot=, what the DAG passes when none is given) is "
                             "ignored: without a non-empty one, the usual selection")
    ep.add_job_filter(p, "job (and savepoint) directories")
    ep.add_flag(p, "--include-external",
                "also copy referenced files outside the indexed roots (below <target>/_external/); without "
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


def options(args: argparse.Namespace) -> DrOptions:
    return DrOptions(targets=TargetSpec.parse(args.target), allowed_targets=parse_allowed(args.allowed_targets),
                     mode=DrMode(args.mode), savepoints=SavepointPolicy(args.savepoints),
                     snapshots=ep.snapshots_from(args.snapshot),
                     job_filter=args.job_filter or None, include_external=args.include_external,
                     verify=VerifyMode(args.verify), copies_in_flight=args.copies_in_flight,
                     max_fallbacks=args.max_fallbacks, max_copies_per_second=args.max_copies_per_second)


def _target_store() -> Any:
    """The DR store's settings (STATEKEEPER_DR_* variables); None: the source's. Not an option: secrets
    stay out of the recorded options."""
    from statekeeper.storage import StorageConfig

    return StorageConfig.target_from_env()


def exit_code(result: Any, args: argparse.Namespace) -> ExitCode:
    from statekeeper.tables.vocabulary import DrRunStatus

    return ExitCode.OK if result.status == DrRunStatus.SUCCEEDED else ExitCode.ATTENTION


ENTRY = ep.JobEntry(DR, DESCRIPTION, add_arguments, options, exit_code,
                    preflight=lambda _options: _target_store(),
                    wire=lambda builder: builder.target_storage(_target_store()))
