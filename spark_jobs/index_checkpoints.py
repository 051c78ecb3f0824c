#!/usr/bin/env python
"""Index Flink checkpoints and savepoints into Delta tables (thin entry point).

Exit status: see `--help` (statekeeper.registry.INDEX).

Runs under spark-submit:

    spark-submit spark_jobs/index_checkpoints.py --roots s3://bucket/checkpoints,s3://bucket/savepoints \
        --warehouse s3://bucket/statekeeper

and from Python (`main([...])`, reusing an active SparkSession). S3 credentials and endpoint come
from the environment, never from the command line. The logic lives in statekeeper.index.job;
docs/tables.md documents the tables written."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("index_checkpoints", __name__)   # executed (spark-submit): runs the job and exits with its code
