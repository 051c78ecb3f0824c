#!/usr/bin/env python
"""Copy each job's latest restorable checkpoint (and savepoints) to disaster-recovery roots (thin entry point).

Exit status: see `--help` (statekeeper.registry.DR).

Runs under spark-submit after index, chains and validate, against the same warehouse:

    spark-submit spark_jobs/copy_to_dr.py --warehouse s3://bucket/statekeeper \\
        --target s3://dr-bucket/flink --allowed-targets s3://dr-bucket/
    spark-submit spark_jobs/copy_to_dr.py --warehouse ... --target s3://src/checkpoints=s3://dr/checkpoints \\
        --target s3://src/savepoints=s3://dr/savepoints --allowed-targets s3://dr/ --verify checksum
    spark-submit spark_jobs/copy_to_dr.py --warehouse ... --mode verify ...     # re-verify the copies

Files first (concurrently, in Spark tasks), then each snapshot's rewritten `_metadata`, written last and
only once every object it names is verified at the target. The DR store's S3 settings come from the
STATEKEEPER_DR_* variables (STATEKEEPER_DR_S3_ENDPOINT, STATEKEEPER_DR_AWS_ACCESS_KEY_ID, ...); without
them the targets are reached with the source's settings. The logic lives in statekeeper.replicate;
docs/dr-copy.md documents the rules and the dr_copies table."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("copy_to_dr", __name__)   # executed (spark-submit): runs the job and exits with its code
