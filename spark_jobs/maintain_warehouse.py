#!/usr/bin/env python
"""Compact and vacuum the warehouse's own Delta tables (thin entry point).

Exit status: see `--help` (statekeeper.registry.MAINTAIN).

Runs under spark-submit between runs of the other jobs (the maintenance DAG: on Sundays), against
their warehouse:

    spark-submit spark_jobs/maintain_warehouse.py --warehouse s3://bucket/statekeeper            # 7d retention
    spark-submit spark_jobs/maintain_warehouse.py --warehouse ... --warehouse-retention 14d --dry-run

Never deletes a file of a table version a job still reads: a retention shorter than that is refused
before any table changes. The logic lives in statekeeper.maintain (its command line:
statekeeper.maintain.entry) and statekeeper.tables.maintenance; docs/tables.md, "Warehouse maintenance",
documents the rules and the maintenance_runs table."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("maintain_warehouse", __name__)   # executed (spark-submit): runs the job and exits with its code
