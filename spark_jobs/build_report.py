#!/usr/bin/env python
"""Write the warehouse's HTML report (thin entry point; the DAG's last task).
Exit status: see `--help` (statekeeper.registry.REPORT).

    spark-submit spark_jobs/build_report.py --warehouse s3://bucket/statekeeper --run-id "$RUN_ID"

The page goes to <warehouse>/_reports/runs/<run>/index.html and <warehouse>/_reports/latest.json
points at it; the Airflow UI's Statekeeper page shows it. The logic lives in statekeeper.report;
docs/reports.md describes every view and the table it comes from."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("build_report", __name__)   # executed (spark-submit): runs the job and exits with its code
