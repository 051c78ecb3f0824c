"""`statekeeper explain <uri> --warehouse W [--json] [--check]`."""
from __future__ import annotations

import sys

from statekeeper.cli import EXIT_OK, CommandUsageError

NAME = "explain"
HELP = (
    "Explain a job directory, savepoint, snapshot or file from the index: which retained snapshots "
    "reference it (directly and through their lineage), so whether deleting it would break one; for a "
    "snapshot, every file it needs and where it lives. With --inactive-after and no URI: the job directories "
    "with no checkpoint newer than that, their bytes, and which live jobs still use their files."
)
EXIT_REFERENCED = 5  # --check: something retained references the URI


def configure(parser) -> None:
    parser.add_argument("uri", nargs="?",
                        help="a job directory, savepoint or checkpoint directory, `_metadata`, shared/ "
                             "directory or file (local path, or a file://, s3://, oss://, gs:// or abfss:// URI)")
    parser.add_argument("--warehouse", required=True,
                        help="where the Delta tables live (the index and chains jobs' --warehouse)")
    parser.add_argument("--json", action="store_true", help="emit the report as JSON (statekeeper.inspect.explain)")
    parser.add_argument("--inactive-after", metavar="DURATION",
                        help="instead of a URI: list the job directories with no checkpoint newer than DURATION "
                             "(e.g. 7d; a directory with no checkpoint left: no object newer), their objects and "
                             "bytes, and the other job directories whose retained snapshots use their files (the "
                             "Kubernetes operator's runs under old job ids). The GC's --inactive-after reclaims "
                             "what nothing uses")
    parser.add_argument("--check", action="store_true",
                        help=f"exit {EXIT_REFERENCED} if any other retained snapshot references the URI (a guard "
                             "before deleting it), or if the index cannot vouch for the answer")


def run(args) -> int:
    import json
    import os

    from statekeeper.inspect.explain import explain, render_text

    if args.inactive_after is not None or args.uri is None:
        return _idle(args)
    target = args.uri
    if "://" not in target and not target.startswith("file:"):
        target = os.path.abspath(target)
    try:
        report = explain(target, _open_warehouse(args))
    except ValueError as exc:   # a target or warehouse that cannot be asked about as given (a bad spelling, scheme)
        raise CommandUsageError(str(exc)) from exc
    sys.stdout.write(json.dumps(report.to_mapping(), indent=2) + "\n" if args.json else render_text(report))
    if args.check and (report.would_break or report.caveats):
        return EXIT_REFERENCED
    return EXIT_OK


def _open_warehouse(args):
    """The --warehouse of either form of the command (a relative path is taken from the working directory)."""
    import os

    from statekeeper.storage import StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    return Warehouse(args.warehouse if "://" in args.warehouse else os.path.abspath(args.warehouse),
                     StorageConfig.from_env())


def _idle(args) -> int:
    """--inactive-after: the idle job directories (statekeeper.inspect.idle)."""
    import dataclasses
    import json
    from datetime import datetime, timezone

    from statekeeper.inspect.idle import idle_job_dirs
    from statekeeper.jobs.idle import render_text
    from statekeeper.units import DurationError, parse_duration

    if args.uri is not None or args.inactive_after is None:
        raise CommandUsageError("give a URI, or --inactive-after DURATION (without a URI) to list idle job directories")
    try:
        cutoff = datetime.now(timezone.utc) - parse_duration(args.inactive_after)
    except DurationError as exc:
        raise CommandUsageError(f"--inactive-after: {exc}") from exc
    dirs = idle_job_dirs(_open_warehouse(args), cutoff)
    if args.json:
        payload = {"schema_version": 1, "inactive_before": cutoff.isoformat(),
                   "idle_job_dirs": [dataclasses.asdict(d) for d in dirs]}
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_text(dirs, cutoff))
    if args.check and any(d.live_pinners for d in dirs):
        return EXIT_REFERENCED
    return EXIT_OK
