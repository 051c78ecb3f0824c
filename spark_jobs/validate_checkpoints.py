#!/usr/bin/env python
"""Validate every indexed checkpoint and savepoint (thin entry point).

Exit status: see `--help` (statekeeper.registry.VALIDATE).

Runs under spark-submit after the index job, against the same warehouse:

    spark-submit spark_jobs/validate_checkpoints.py --warehouse s3://bucket/statekeeper \
        --roots s3://bucket/checkpoints,s3://bucket/savepoints --run-id "$RUN_ID"

and from Python (`main([...])`, reusing an active SparkSession). S3 settings come from the
environment, never from the command line. The logic lives in statekeeper.validate.job;
docs/chains-and-validation.md documents the checks and tables (validation_results,
validation_jobs, validation_runs) and where the Great Expectations Data Docs go."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("validate_checkpoints", __name__)   # executed (spark-submit): runs the job and exits with its code
