"""Read a warehouse's tables into the figures of one scope (statekeeper.metrics.figures).

Through the project's one reader without Spark (statekeeper.tables.reader): the push runs in the Airflow task
after the run's Spark steps, where no Spark session exists. The index tables are read at the cut of the newest
succeeded index run, as every reader of the index reads them (statekeeper.tables.cut); the others at their
latest version. The large tables go through one data file at a time.
"""
from __future__ import annotations

from collections.abc import Iterator

from statekeeper.metrics import figures as f
from statekeeper.metrics.names import Scope
from statekeeper.metrics.settings import Thresholds
from statekeeper.tables.vocabulary import GcRunStatus
from statekeeper.tables.warehouse import Warehouse

INDEX_TABLES = ("files", "snapshots", "references")


def gather(warehouse: Warehouse, scope: Scope, thresholds: Thresholds | None = None) -> list[f.Sample]:
    """Every figure of `scope` the warehouse's tables hold (a table that does not exist gives none), and the
    thresholds its rules use."""
    thresholds = thresholds or Thresholds()
    samples = maintenance(warehouse) if scope is Scope.MAINTENANCE else dr(warehouse, scope.value)
    return samples + f.threshold_samples(scope, thresholds)


def maintenance(warehouse: Warehouse) -> list[f.Sample]:
    from statekeeper.tables import cut
    from statekeeper.tables.reader import TableReader

    index_cut = cut.latest_cut(warehouse)
    versions = {} if index_cut is None else {t: v for t in INDEX_TABLES if (v := index_cut.version(t)) is not None}
    reader = TableReader(warehouse, versions)
    samples: list[f.Sample] = []
    runs = {step: f.run_states(step, reader.read(f.STEPS[step].table).to_pylist()) for step in f.MAINTENANCE_STEPS}
    for step in f.MAINTENANCE_STEPS:
        samples += f.run_samples(step, runs[step])
    samples += f.gc_samples(runs["gc"])

    jobs = reader.read("validation_jobs").to_pylist()
    fold = f.StorageFold(f.wanted_snapshots(jobs))
    if index_cut is not None:
        for batch in _batches(reader, "references", ["root", "job_dir", "file_root", "file_job_dir", "file_uri"]):
            fold.add_references(batch)
        for batch in _batches(reader, "files", ["uri", "root", "job_dir", "size"]):
            fold.add_files(batch)
        for batch in _batches(reader, "snapshots", ["uri", "root", "job_dir", "metadata_mtime", "inline_bytes"]):
            fold.add_snapshots(batch)
        samples += fold.samples()
    samples += f.validation_samples(jobs, fold.completed)

    if runs["gc"]:
        newest = runs["gc"][-1]
        if newest["status"] == GcRunStatus.REQUESTED:   # still planning (or died planning): no plan to read
            return samples + f.ownerless_samples(newest)
        plan_run = newest["plan_run_id"] or newest["run_id"]
        plan = reader.read("gc_actions", partitions=[("run_id", "=", plan_run)],
                           columns=["root", "job_dir", "size", "outcome"])
        samples += f.reclaimable_samples(plan, fold.stored)
        samples += f.ownerless_samples(newest)
    return samples


def dr(warehouse: Warehouse, step: str) -> list[f.Sample]:
    from statekeeper.tables.reader import TableReader

    reader = TableReader(warehouse)
    runs = f.run_states(step, reader.read("dr_runs").to_pylist())
    samples = f.run_samples(step, runs) + f.dr_run_samples(step, runs)
    fold = f.DrCopiesFold(step)
    for batch in _batches(reader, "dr_copies", ["run_id", "source_root", "job_dir", "snapshot_type", "status",
                                                "selected_by", "finished_at", "source_completed_at"]):
        fold.add(batch)
    if step == "dr_follow":
        fold.add_follow_runs(runs)
    return samples + fold.samples()


def _batches(reader, name: str, columns: list[str]) -> Iterator:
    """The table's rows at the reader's version, one data file at a time (nothing when it does not exist)."""
    from statekeeper.tables.reader import read_files

    state = reader.state(name)
    if state is None:
        return
    io = reader.warehouse.file_io()
    for data_file in state.files:
        yield read_files(reader.warehouse, state.schema, state.partition_by, [data_file], table_name=name,
                         columns=columns, fileio=io)
