"""`statekeeper explain <uri> --warehouse W [--json] [--check]`."""
from __future__ import annotations

import sys

from statekeeper.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from statekeeper.errors import StatekeeperError

NAME = "explain"
HELP = (
    "Explain a job directory, savepoint, snapshot or file from the index: which retained snapshots "
    "reference it (directly and through their lineage), so whether deleting it would break one; for a "
    "snapshot, every file it needs and where it lives."
)
EXIT_REFERENCED = 5  # --check: something retained references the URI


def configure(parser) -> None:
    parser.add_argument("uri", help="a job directory, savepoint or checkpoint directory, `_metadata`, shared/ "
                                    "directory or file (local path, or a file://, s3://, oss://, gs:// or abfss:// URI)")
    parser.add_argument("--warehouse", required=True,
                        help="where the Delta tables live (the index and chains jobs' --warehouse)")
    parser.add_argument("--json", action="store_true", help="emit the report as JSON (statekeeper.chains.explain)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit {EXIT_REFERENCED} if any other retained snapshot references the URI (a guard "
                             "before deleting it), or if the index cannot vouch for the answer")


def run(args) -> int:
    import json
    import os

    from statekeeper.chains.explain import explain, render_text
    from statekeeper.storage import StorageConfig
    from statekeeper.tables.warehouse import Warehouse

    target = args.uri
    if "://" not in target and not target.startswith("file:"):
        target = os.path.abspath(target)
    try:
        warehouse = Warehouse(args.warehouse if "://" in args.warehouse else os.path.abspath(args.warehouse),
                              StorageConfig.from_env())
        report = explain(target, warehouse)
    except ValueError as exc:
        print(f"statekeeper explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StatekeeperError as exc:
        print(f"statekeeper explain: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(json.dumps(report.to_mapping(), indent=2) + "\n" if args.json else render_text(report))
    if args.check and (report.would_break or report.caveats):
        return EXIT_REFERENCED
    return EXIT_OK
