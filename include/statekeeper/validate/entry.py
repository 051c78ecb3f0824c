"""The validation job's command line: `spark_jobs/validate_checkpoints.py`."""
from __future__ import annotations

import argparse

from statekeeper.launch import entrypoint as ep
from statekeeper.registry import VALIDATE, ExitCode
from statekeeper.validate.options import ValidateOptions

DESCRIPTION = (
    "Check every indexed snapshot: _metadata parses, every referenced file exists and is at least as long as "
    "stated (segments included), relative handles resolve beside _metadata (FLINK-39964), cross-directory "
    "dependencies (warnings). Reports per job the newest retained checkpoint, whether it restores, and the "
    "latest one that does; runs a Great Expectations suite over the index tables.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    ep.add_root_arguments(p, "locations where referenced files outside the indexed roots may be stat'ed (usually "
                             "the index job's roots plus any other bucket/prefix snapshots point into); files "
                             "outside every root are reported as unverifiable errors")
    p.add_argument("--no-quality-suite", action="store_true",
                   help="skip the Great Expectations suite over the index tables")
    p.add_argument("--stat-threads", type=int, default=8, help="concurrent stat requests per Spark task")


def options(args: argparse.Namespace) -> ValidateOptions:
    if args.stat_threads < 1:
        raise ep.UsageError("--stat-threads must be >= 1")
    return ValidateOptions(roots=tuple(ep.roots_from(args)), quality_suite=not args.no_quality_suite,
                           stat_threads=args.stat_threads)


def preflight(options: ValidateOptions) -> None:
    from statekeeper.storage import Roots

    if options.roots:
        Roots(list(options.roots))      # overlapping or unsupported roots: before Spark starts


def exit_code(result: object, args: argparse.Namespace) -> ExitCode:
    from statekeeper.tables.vocabulary import ValidationRunStatus as S

    # quality_failed: the index cannot be trusted, as an internal failure (retried)
    return {S.OK: ExitCode.OK, S.UNRESTORABLE: ExitCode.ATTENTION}.get(result.status, ExitCode.INTERNAL)


ENTRY = ep.JobEntry(VALIDATE, DESCRIPTION, add_arguments, options, exit_code, preflight=preflight)
