"""The garbage-collection job's command line: `spark_jobs/collect_garbage.py`."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from statekeeper.launch import entrypoint as ep
from statekeeper.defaults import GC_GRACE, GC_GRACE_TEXT
from statekeeper.gc.options import GcOptions, RetentionPolicy, parse_duration
from statekeeper.registry import GC, ExitCode

DESCRIPTION = (
    "Garbage-collect the roots of the newest succeeded index run. Plans first (gc_actions, gc_runs); with "
    "--mode delete re-checks every file (same size and etag as indexed), lists the roots again for _metadata "
    "written since the index, and deletes concurrently. Never deletes when the index is partial or stale, the "
    "chains tables are stale, any _metadata is unreadable, or a reference spells a root differently.")


def _optional(cast: Callable[[str], Any]) -> Callable[[str], Any]:
    """An option whose empty value (an unset Airflow param) means "not given"."""
    def parse(text: str) -> Any:
        return None if text.strip() in ("", "None", "null") else cast(text)
    parse.__name__ = getattr(cast, "__name__", "value")
    return parse


def _timestamp(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--mode", choices=["plan", "delete"], default="plan",
                      help="plan: write the plan and delete nothing (default); delete: plan and delete")
    mode.add_argument("--execute", metavar="RUN_ID", default="",
                      help="execute the persisted plan of an earlier dry run (after the same re-checks)")
    p.add_argument("--older-than", type=_optional(parse_duration), default=None, metavar="DURATION",
                   help=f"grace period: nothing younger is deleted, e.g. 90m, 12h, 3d (default "
                        f"{GC_GRACE_TEXT}; below 1h needs --allow-short-grace)")
    p.add_argument("--allow-short-grace", action="store_true",
                   help="accept a grace period below one hour (tests; roots no Flink job writes to)")
    p.add_argument("--retain-last", type=_optional(int), default=None, metavar="N",
                   help="expire all but the newest N checkpoints of every job (default: expire nothing)")
    p.add_argument("--inactive-after", type=_optional(parse_duration), default=None, metavar="DURATION",
                   help="a job whose newest checkpoint is older than this keeps only --inactive-retain checkpoints")
    p.add_argument("--inactive-retain", type=_optional(int), default=None, metavar="K",
                   help="checkpoints an inactive job keeps (default 1; its newest is always kept)")
    p.add_argument("--expire-savepoints-older-than", type=_optional(parse_duration), default=None,
                   metavar="DURATION", help="expire savepoints older than this (default: never; savepoints are user data)")
    ep.add_flag(p, "--roots-complete",
                "declare that the roots of the index run are every root any job may restore from, so files "
                "in a job directory without any snapshot (ownerless: e.g. a job whose checkpoint a job in "
                "another root claimed, CLAIM or LEGACY restore) may be deleted when unreferenced. Default: "
                "such directories are held back and listed in the summary")
    p.add_argument("--ownerless-older-than", type=_optional(parse_duration), default=None, metavar="DURATION",
                   help="also judge ownerless job directories whose newest object is older than this; must be longer "
                        "than --older-than, e.g. 90d (default: never)")
    p.add_argument("--max-deletes-per-second", type=_optional(float), default=None, metavar="R",
                   help="limit for the whole run, shared by its tasks (default: unlimited)")
    p.add_argument("--requests-in-flight", type=int, default=4, metavar="N",
                   help="concurrent delete and re-check requests per Spark task on object stores (S3/OSS "
                        "DeleteObjects, GCS and Azure batch requests; default 4)")
    p.add_argument("--index-not-before", type=_optional(_timestamp), default=None, metavar="ISO-TIMESTAMP",
                   help="refuse to delete when the newest succeeded index run finished before this (the DAG passes "
                        "its run's start)")
    p.add_argument("--equal-schemes", default="", metavar="SCHEMES",
                   help="comma-separated aliases of s3 accepted in stored paths: s3a, s3n, s3p (default: none; a "
                        "reference spelled s3a:// under an s3:// root blocks the run). Azure's wasb/wasbs/abfs/abfss "
                        "spellings of one container never block; a root's bucket under another store's scheme "
                        "(s3:// for an oss:// or gs:// root) always blocks")


def options(args: argparse.Namespace) -> GcOptions:
    from statekeeper.gc.deleter import DeleteSettings
    from statekeeper.tables.vocabulary import GcMode

    policy = RetentionPolicy(retain_last=args.retain_last, inactive_after=args.inactive_after,
                             inactive_retain=args.inactive_retain or 1,
                             expire_savepoints_older_than=args.expire_savepoints_older_than)
    return GcOptions(mode=GcMode.EXECUTE if args.execute else GcMode(args.mode), plan_run_id=args.execute or None,
                     older_than=args.older_than or GC_GRACE, allow_short_grace=args.allow_short_grace,
                     policy=policy, max_deletes_per_second=args.max_deletes_per_second,
                     index_not_before=args.index_not_before, roots_complete=args.roots_complete,
                     ownerless_older_than=args.ownerless_older_than,
                     delete=DeleteSettings(requests_in_flight=max(1, args.requests_in_flight)),
                     equal_schemes=tuple(s for s in args.equal_schemes.split(",") if s.strip()))


def exit_code(result: Any, args: argparse.Namespace) -> ExitCode:
    from statekeeper.tables.vocabulary import GcRunStatus

    done = result.status in (GcRunStatus.PLANNED, GcRunStatus.COMPLETED) and not result.failed
    return ExitCode.OK if done else ExitCode.ATTENTION


ENTRY = ep.JobEntry(GC, DESCRIPTION, add_arguments, options, exit_code)
