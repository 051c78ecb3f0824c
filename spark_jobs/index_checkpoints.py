#!/usr/bin/env python
"""Index Flink checkpoints and savepoints into Delta tables (thin entry point).

Runs under spark-submit:

    spark-submit spark_jobs/index_checkpoints.py --roots s3://bucket/checkpoints,s3://bucket/savepoints \
        --warehouse s3://bucket/statekeeper

and from Python (`main([...])`, reusing an active SparkSession). S3 credentials and endpoint come
from the environment, never from the command line. The logic lives in statekeeper.index.job;
docs/tables.md documents the tables written.

Exit status: see `--help` (statekeeper.registry.INDEX).
"""
from __future__ import annotations

import sys

try:
    from statekeeper.entrypoint import entry_point
    from statekeeper.index.entry import ENTRY
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit("cannot import statekeeper: run `make setup` (installs it into .venv) or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = entry_point(ENTRY)

if __name__ == "__main__":
    sys.exit(main())
