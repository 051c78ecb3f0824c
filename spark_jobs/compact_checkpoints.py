#!/usr/bin/env python
"""Move inline state out of bloated `_metadata` files (thin entry point).

Exit status: see `--help` (statekeeper.registry.COMPACT).

Runs under spark-submit after index, chains and validate, against the same warehouse:

    spark-submit spark_jobs/compact_checkpoints.py --warehouse s3://bucket/statekeeper        # > 64 MiB
    spark-submit spark_jobs/compact_checkpoints.py --warehouse ... --snapshot s3://b/ck/<job>/chk-42 --dry-run
    spark-submit spark_jobs/compact_checkpoints.py --warehouse ... --snapshot ... --in-place   # stopped jobs only

By default each result is a new snapshot directory, `<job dir>/compacted/chk-N/`, beside the source,
which is never modified; restore from it like from any retained checkpoint. The logic lives in
statekeeper.compact (its command line: statekeeper.compact.entry); docs/compaction.md documents the rules
and the compactions table. Statekeeper's own tables are maintained by spark_jobs/maintain_warehouse.py."""
try:
    from statekeeper.launch.entrypoint import script
except ImportError as _exc:  # spark-submit with a Python that lacks the library
    raise SystemExit(f"cannot import statekeeper ({_exc}): run `make setup` (installs it into .venv), or ship it "
                     "with --py-files statekeeper.zip (the Airflow operator does)") from _exc

parser, main = script("compact_checkpoints", __name__)   # executed (spark-submit): runs the job and exits with its code
