"""The warehouse maintenance job's command line: `spark_jobs/maintain_warehouse.py`."""
from __future__ import annotations

import argparse
from typing import Any

from statekeeper.launch import entrypoint as ep
from statekeeper.defaults import WAREHOUSE_RETENTION_TEXT
from statekeeper.maintain.options import MaintainOptions
from statekeeper.registry import MAINTAIN, ExitCode
from statekeeper.units import parse_duration

DESCRIPTION = (
    "Compact the small files of Statekeeper's own Delta tables (the audit tables, the index partitions every run "
    "rewrites), vacuum the files removed more than --warehouse-retention ago, and write a checkpoint of each "
    "table. Never deletes a file of a table version a job still reads (refused before any table changes); "
    "absent tables are skipped. Run it between runs (weekly): a job that commits meanwhile has to be re-run.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warehouse-retention", default=WAREHOUSE_RETENTION_TEXT, metavar="DURATION",
                   help=f"keep files of table versions younger than this (default {WAREHOUSE_RETENTION_TEXT}); "
                        "refused when shorter than the age of a version a job still reads")
    ep.add_flag(p, "--dry-run",
                "report what compaction and vacuum would do; change nothing (also --dry-run=true|false)")


def options(args: argparse.Namespace) -> MaintainOptions:
    return MaintainOptions(retention=parse_duration(args.warehouse_retention, "--warehouse-retention"),
                           dry_run=args.dry_run)


def exit_code(result: Any, args: argparse.Namespace) -> ExitCode:
    from statekeeper.tables.vocabulary import MaintenanceRunStatus

    return ExitCode.OK if result.status == MaintenanceRunStatus.SUCCEEDED else ExitCode.ATTENTION


ENTRY = ep.JobEntry(MAINTAIN, DESCRIPTION, add_arguments, options, exit_code)
