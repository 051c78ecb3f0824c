"""`statekeeper report --warehouse W [--out DIR]`: the report job on a local Spark session."""
from __future__ import annotations

NAME = "report"
HELP = ("Write the warehouse's HTML report (storage per job, lineage, restorability, _metadata bloat, GC, DR and "
        "compaction outcomes) under <warehouse>/_reports/ and print where it is.")


def configure(parser) -> None:
    parser.add_argument("--warehouse", required=True, help="where the Delta tables live (local path or s3:// prefix)")
    parser.add_argument("--out", default="", metavar="DIR", help="also write the page to this local directory")
    parser.add_argument("--master", default="local[2]", help="Spark master for the session (default local[2])")
    parser.add_argument("--result-json", default="", help="also write the run's result as JSON to this file")


def run(args) -> int:
    import os

    from statekeeper.launch.entrypoint import run
    from statekeeper.report.entry import ENTRY

    warehouse = args.warehouse if "://" in args.warehouse else os.path.abspath(args.warehouse)
    argv = ["--warehouse", warehouse, "--master", args.master, "--progress-interval", "10"]
    if args.out:
        argv += ["--out", os.path.abspath(args.out)]
    if args.result_json:
        argv += ["--result-json", args.result_json]
    code = run(ENTRY, argv, prog="statekeeper report")
    if code == 0:
        print("Open it in a browser (no network needed), or in the Airflow UI: Browse > Statekeeper "
              "(the page of the warehouse in the Variable statekeeper_warehouse).")
    return code
