"""Index one bucket partition (root_id, bucket): the job directories that hash into it.

The bucket is what gets rewritten, the job directory is what gets compared:
* every job directory of the bucket in scope is indexed as a unit (`index_unit`): the current
  children of the root that hash here, plus job directories the previous rows name (a vanished
  directory lists empty, so its rows disappear, exactly as when it had its own partition);
* when no unit changed (all unchanged, or failed and keeping their rows), nothing is written;
* otherwise the bucket's files are replaced by one file per table holding, in job_dir order, the
  rebuilt rows of changed units and the previous rows, carried over verbatim, of unchanged and
  failed units and of job directories outside the run's job filter.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import pyarrow as pa

from statekeeper.index.unit import REWRITTEN, UnitContext, UnitPlan, UnitResult, UnitStats, index_unit
from statekeeper.storage import Root
from statekeeper.tables.catalog import INDEX_TABLES, ROOT_LEVEL_JOB_DIR
from statekeeper.tables.files import DataFile

# Key columns are enough to learn which job directories the previous rows name.
_JOB_DIR_ONLY = ["job_dir"]


@dataclass
class BucketPlan:
    root: Root
    bucket: str
    job_dirs: list[str]                            # current children of the root in this bucket, in scope
    previous: dict[str, list[DataFile]]            # table -> data files of the (root_id, bucket) partition
    job_filter: str | None = None                  # glob: previous job dirs outside it are kept as they are

    @property
    def partition(self) -> dict[str, str]:
        return {"root_id": self.root.root_id, "bucket": self.bucket}

    def in_scope(self, job_dir: str) -> bool:
        if not self.job_filter:
            return True
        return job_dir != ROOT_LEVEL_JOB_DIR and fnmatch.fnmatchcase(job_dir, self.job_filter)


@dataclass
class BucketResult:
    stats: UnitStats
    units: dict[str, UnitResult] = field(default_factory=dict)   # job_dir -> outcome of its unit
    tables: dict[str, pa.Table] = field(default_factory=dict)    # the bucket's new rows, per table
    removes: dict[str, list[DataFile]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.tables or self.removes)


def index_bucket(ctx: UnitContext, plan: BucketPlan, max_errors: int = 50) -> BucketResult:
    ctx.clear_previous()
    try:
        previous_jobs: set[str] = set()
        for name in ("files", "snapshots"):
            previous_jobs |= ctx.previous_job_dirs(name, plan.previous.get(name, []), _JOB_DIR_ONLY)
        jobs = sorted(set(plan.job_dirs) | {j for j in previous_jobs if plan.in_scope(j)})
        stats = UnitStats()
        units: dict[str, UnitResult] = {}
        for job_dir in jobs:
            result = index_unit(ctx, UnitPlan(plan.root, job_dir, plan.previous))
            units[job_dir] = result
            stats.add(result.stats, max_errors)
        if not any(r.outcome == REWRITTEN for r in units.values()):
            return BucketResult(stats, units)

        tables: dict[str, pa.Table] = {}
        for spec in INDEX_TABLES:
            parts = []
            for job_dir in sorted(set(jobs) | previous_jobs):
                unit = units.get(job_dir)
                if unit is not None and unit.outcome == REWRITTEN:
                    part = unit.tables.get(spec.name)
                else:  # unchanged, failed (previous rows kept) or outside the job filter
                    part = ctx.read_previous(spec.name, plan.previous.get(spec.name, []), job_dir=job_dir)
                if part is not None and part.num_rows:
                    parts.append(spec.conform(part))
            if parts:
                tables[spec.name] = pa.concat_tables(parts)
        removes = {name: list(files) for name, files in plan.previous.items() if files}
        return BucketResult(stats, units, tables, removes)
    finally:
        ctx.clear_previous()
