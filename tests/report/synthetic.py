"""A report's data for a large synthetic store (default: 1,000 jobs, 50,000 snapshots), cut the way
`statekeeper.report.gather` cuts it (top N with totals), for the readability test and bench/report.py."""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from statekeeper.report.gather import Limits
from statekeeper.report.model import (
    GcSummary,
    JobHealth,
    JobStorage,
    LineageEdge,
    LineageNode,
    MetadataPoint,
    OperatorInline,
    OutcomeCount,
    ReportData,
    StorageTotals,
    TrendPoint,
)

ROOT = "s3://bucket/checkpoints"
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def synthetic_report(jobs: int = 1000, snapshots_per_job: int = 50, seed: int = 7,
                     limits: Limits = Limits()) -> ReportData:
    rng = random.Random(seed)
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(jobs)]
    parent = {j: (ids[rng.randrange(i)] if i and rng.random() < 0.6 else None) for i, j in enumerate(ids)}
    storage = []
    for j in ids:
        total = rng.randrange(10, 5000) * 2**20
        pinned = total // rng.randrange(2, 10) if j in parent.values() else 0
        storage.append(JobStorage(ROOT, j, j, rng.randrange(100, 5000), total, 10, pinned, 3,
                                  rng.randrange(0, total // 10), snapshots_per_job, 2**20 * snapshots_per_job,
                                  rng.randrange(0, 2**20) * snapshots_per_job))
    storage.sort(key=lambda r: -r.total_bytes)
    totals = StorageTotals(len(storage), sum(r.files for r in storage), sum(r.total_bytes for r in storage),
                           sum(r.pinned_bytes for r in storage), sum(r.reclaimable_bytes for r in storage),
                           sum(r.inline_bytes for r in storage), jobs * snapshots_per_job)
    edges = sorted((LineageEdge(ROOT, j, ROOT, p, rng.randrange(1, 400), rng.randrange(1, 2**30))
                    for j, p in parent.items() if p), key=lambda e: -e.bytes)
    shown = edges[:limits.edges]
    bad = set(rng.sample(ids, min(30, jobs // 2)))
    keys = sorted({e.job_dir for e in shown} | {e.target_job_dir for e in shown})
    nodes = tuple(LineageNode(ROOT, k, k, "job", k not in bad, rng.randrange(1, 2**32)) for k in keys)
    health = sorted((JobHealth(ROOT, j, j, "job", "ok", snapshots_per_job, f"{ROOT}/{j}/chk-{snapshots_per_job}/_metadata",
                               snapshots_per_job, j not in bad, f"{ROOT}/{j}/chk-{snapshots_per_job - 1}/_metadata",
                               snapshots_per_job - 1, ("file_exists",) if j in bad else ()) for j in ids),
                    key=lambda h: (h.newest_restorable, h.job_dir))[:limits.health]
    series = tuple(MetadataPoint(ROOT, j, c, 2**20 + c * 4096, c * 3000)
                   for j in ids[:limits.metadata_jobs] for c in range(1, min(snapshots_per_job, limits.metadata_points) + 1))
    operators = tuple(OperatorInline(ROOT, ids[i], f"operator-{i}", f"op{i}", snapshots_per_job, 2**24 - i, 2**18)
                      for i in range(min(limits.operators, jobs)))
    gc = GcSummary("gc-1", "gc-1", "planned", "plan", T0, 12000, 2**34, 0, 0, 0, 0, 0, (),
                   (OutcomeCount("orphan", "planned", 9000, 2**33), OutcomeCount("failed_checkpoint", "planned", 3000, 2**33)))
    trend = tuple(TrendPoint(f"rpt-{i}", T0 + timedelta(days=i), totals.total_bytes + i * 2**30, totals.pinned_bytes,
                             totals.reclaimable_bytes, totals.inline_bytes, len(bad)) for i in range(limits.trend_runs))
    return ReportData(
        run_id="rpt-synthetic", generated_at=T0, warehouse="s3://bucket/statekeeper", index_run_id="idx-1",
        versions={"files": 3, "snapshots": 3, "references": 3, "validation_jobs": 2, "gc_actions": 1},
        totals=totals, storage=tuple(storage[:limits.storage]), lineage_nodes=nodes, lineage_edges=tuple(shown),
        lineage_edge_count=len(edges), lineage_edge_bytes=sum(e.bytes for e in edges), health=tuple(health),
        jobs=jobs, jobs_unrestorable=len(bad), jobs_not_validated=0, validation_run_id="val-1",
        metadata_series=series, operators=operators, gc=gc, compaction=None, dr=None, dr_verified_jobs=0,
        trend=trend, limits=limits.__dict__.copy())
