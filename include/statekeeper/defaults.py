"""Option defaults that more than one layer spells: each is defined once, here.

Standard library only, on the ground floor: a job's options, its entry point's `--help`, the DAGs'
forms and templates, and warehouse maintenance's retention floor all read them. Each is spelled as
its option takes it (what `--help` and the DAG templates show) and parsed once for the code.
"""
from __future__ import annotations

from statekeeper.units import parse_duration, parse_size

# GC's grace period (--older-than): nothing younger is deleted. Also the shortest window in which
# GC reads the `references` of earlier index runs, so warehouse maintenance keeps those versions.
GC_GRACE_TEXT = "3d"
GC_GRACE = parse_duration(GC_GRACE_TEXT)

# Warehouse maintenance's vacuum retention (--warehouse-retention): weekly maintenance keeps a week.
WAREHOUSE_RETENTION_TEXT = "7d"
WAREHOUSE_RETENTION = parse_duration(WAREHOUSE_RETENTION_TEXT)

# Compaction selects a `_metadata` larger than this (--max-metadata-size).
COMPACT_MAX_METADATA_SIZE_TEXT = "64MiB"
COMPACT_MAX_METADATA_SIZE = parse_size(COMPACT_MAX_METADATA_SIZE_TEXT)
