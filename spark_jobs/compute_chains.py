#!/usr/bin/env python
"""Compute reference chains across jobs into Delta tables (thin entry point).

Exit status: see `--help` (statekeeper.registry.CHAINS).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/compute_chains.py --warehouse s3://bucket/statekeeper --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, STATEKEEPER_S3_ENDPOINT, ...), never from the
command line. The logic lives in statekeeper.chains.job; docs/chains-and-validation.md documents
the tables (dependencies, pins, chains_runs)."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("compute_chains", __name__)   # executed (spark-submit): runs the job and exits with its code
