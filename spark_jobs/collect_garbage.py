#!/usr/bin/env python
"""Expire retained snapshots by policy and delete files no remaining snapshot references (thin entry point).

Exit status: see `--help` (statekeeper.registry.GC).

Runs under spark-submit after index, chains and validate, against the same warehouse:

    spark-submit spark_jobs/collect_garbage.py --warehouse s3://bucket/statekeeper            # plan only
    spark-submit spark_jobs/collect_garbage.py --warehouse ... --mode delete --older-than 3d
    spark-submit spark_jobs/collect_garbage.py --warehouse ... --execute gc-20261123T020000-1a2b3c4d

The default is a dry run: the plan goes to gc_actions and the summary shows what is reclaimable per
job. The logic lives in statekeeper.gc; docs/gc.md documents the rules and tables."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("collect_garbage", __name__)   # executed (spark-submit): runs the job and exits with its code
