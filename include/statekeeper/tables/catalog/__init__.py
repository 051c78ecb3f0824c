"""Every Statekeeper table: its spec (name, schema, partitioning, description) and its producer.

    statekeeper.tables.catalog.index       files, snapshots, references, inline_state, index_runs
    statekeeper.tables.catalog.chains      dependencies, pins, chains_runs
    statekeeper.tables.catalog.validation  validation_results, validation_jobs, validation_runs
    statekeeper.tables.catalog.gc          gc_actions, gc_runs
    statekeeper.tables.catalog.dr          dr_copies, dr_files, dr_runs
    statekeeper.tables.catalog.compact     compactions, compaction_runs
    statekeeper.tables.catalog.maintain    maintenance_runs
    statekeeper.tables.catalog.report      report_runs

Column vocabularies (the closed sets of values some columns hold) are enums in
`statekeeper.tables.vocabulary`. docs/tables.md and docs/chains-and-validation.md document every column.
"""
from __future__ import annotations

from statekeeper.tables.catalog.compact import COMPACT_TABLES, COMPACTION_RUNS, COMPACTIONS
from statekeeper.tables.catalog.dr import DR_COPIES, DR_FILES, DR_RUNS, DR_TABLES
from statekeeper.tables.catalog.maintain import MAINTENANCE_RUNS
from statekeeper.tables.catalog.report import REPORT_RUNS
from statekeeper.tables.catalog.gc import GC_ACTIONS, GC_RUNS, GC_TABLES
from statekeeper.tables.catalog.chains import CHAINS_RUNS, CHAINS_TABLES, DEPENDENCIES, PINS
from statekeeper.tables.catalog.index import (
    FILES,
    INDEX_RUNS,
    INDEX_TABLES,
    INLINE_STATE,
    JOB_BUCKETS,
    PARTITION_BY,
    REFERENCES,
    ROOT_LEVEL_JOB_DIR,
    SNAPSHOTS,
    TS,
    job_bucket,
)
from statekeeper.tables.catalog.validation import (
    VALIDATION_JOBS,
    VALIDATION_RESULTS,
    VALIDATION_RUNS,
    VALIDATION_TABLES,
)
from statekeeper.tables.spec import TableSpec

ALL_TABLES: tuple[TableSpec, ...] = (*INDEX_TABLES, INDEX_RUNS, *CHAINS_TABLES, CHAINS_RUNS,
                                     *VALIDATION_TABLES, VALIDATION_RUNS, *GC_TABLES, GC_RUNS,
                                     *DR_TABLES, DR_RUNS, *COMPACT_TABLES, COMPACTION_RUNS, MAINTENANCE_RUNS,
                                     REPORT_RUNS)


def spec(name: str) -> TableSpec:
    """The spec of the table `name` (KeyError naming the known tables otherwise)."""
    for t in ALL_TABLES:
        if t.name == name:
            return t
    raise KeyError(f"no Statekeeper table named {name!r}; known: {', '.join(t.name for t in ALL_TABLES)}")


def produced_by(job: str) -> tuple[TableSpec, ...]:
    """The tables the job `job` (its registry name) writes, its audit table included."""
    return tuple(t for t in ALL_TABLES if t.producer == job)


__all__ = ["ALL_TABLES", "CHAINS_RUNS", "COMPACTIONS", "COMPACTION_RUNS", "COMPACT_TABLES", "CHAINS_TABLES", "DEPENDENCIES", "DR_COPIES", "DR_FILES", "DR_RUNS",
           "DR_TABLES", "FILES", "GC_ACTIONS", "GC_RUNS", "GC_TABLES", "INDEX_RUNS", "INDEX_TABLES",
           "INLINE_STATE", "JOB_BUCKETS", "MAINTENANCE_RUNS", "PARTITION_BY", "PINS", "REFERENCES", "REPORT_RUNS", "ROOT_LEVEL_JOB_DIR", "SNAPSHOTS",
           "TS", "VALIDATION_JOBS", "VALIDATION_RESULTS", "VALIDATION_RUNS", "VALIDATION_TABLES", "job_bucket",
           "produced_by", "spec"]
