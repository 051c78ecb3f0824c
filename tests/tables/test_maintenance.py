"""Warehouse maintenance (statekeeper.tables.maintenance) on a real warehouse, nothing mocked.

One warehouse per module, built as production builds it: six index runs (the shared Spark session,
engine delta-rs) over a relocated copy of a real Flink store (`hashmap_full`, newest harness
version) that changes before every run (an orphan file appears in a job's shared/, a checkpoint
directory is copied in or removed again, alternating between two job directories in two buckets),
with chains after the 3rd and the 6th run, then validation and a GC plan, so every Statekeeper
table but the DR copy's exists and every bucket partition of the index and chains tables was
rewritten more than once. Each test maintains its own copy of that warehouse (Delta tables address
their files relative to the table: a copied directory is the same table).
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tests.harness as harness
from statekeeper.inspect.explain import explain
from statekeeper.tables import TableSpec, Warehouse, cut, delta_log
from statekeeper.tables.catalog import ALL_TABLES, INDEX_RUNS, INDEX_TABLES, job_bucket
from statekeeper.tables.errors import MaintenanceOptionsError, RetentionFloorError
from statekeeper.tables.maintenance import TableOutcome, maintain_warehouse, retention_pins
from statekeeper.tables.reader import TableReader
from tests.chains.support import store_roots
from tests.index.support import canonical, run_index
from tests.replicate.support import DrPipeline, dr_pipeline, local, relocated, uri

# The tests on the built warehouse share one fixture (the RUNS index runs, chains, validation and GC);
# the flink and spark markers come from the fixtures they use.
slow = pytest.mark.slow

VERSION = harness.FLINK_VERSIONS[-1]
# The fewest runs that still take each of the two job directories (runs alternate between them)
# through every change kind of `_change` (an orphan, a copied checkpoint, the copy removed: one kind
# per two runs); each job's bucket partitions are written three times or more, as REWRITTEN needs.
RUNS = 6
# GC's default grace period is 3 days and GC reads `references` of every index run inside it: a
# `now` past it lets a zero retention vacuum everything no cut or audit row pins.
LATER = timedelta(days=4)
# Columns that name the run or its time: equal answers differ only there.
RUN_COLUMNS = {"run_id", "validated_at", "index_run_id"}
# Rewritten by every run of their job, which ran more than once: several files per bucket on storage.
REWRITTEN = {"files", "snapshots", "references", "inline_state", "dependencies", "pins"}
# No DR copy, no compaction and no maintenance job ran here: their tables are absent.
ABSENT = ("dr_copies", "dr_files", "dr_runs", "compactions", "compaction_runs", "maintenance_runs", "report_runs")


@dataclass
class Built:
    base: Path
    src: str                       # the relocated store
    roots: list[str]
    warehouse: Warehouse
    index_seconds: list[float]
    jobs: list[Path]


@pytest.fixture(scope="module")
def built(spark, flink_fixture, tmp_path_factory) -> Built:
    base = tmp_path_factory.mktemp("maintenance")
    src = relocated(flink_fixture(VERSION, "hashmap_full"), base / "store")
    p = dr_pipeline(spark, base, store_roots(src))
    first = next(d for d in (local(src) / "checkpoints").iterdir() if d.is_dir())
    second = first.parent / _other_job_id(first.name)
    shutil.copytree(first, second)         # a second job directory, in another bucket
    jobs = [first, second]
    seconds: list[float] = []
    others: Counter = Counter()
    for run in range(RUNS):
        _change(jobs[run % 2], run)
        t0 = time.monotonic()
        result = p.index()
        seconds.append(time.monotonic() - t0)
        assert result.status == "succeeded", result.summary()
        assert result.units_rewritten >= 1
        if run in (RUNS // 2 - 1, RUNS - 1):   # chains twice, mid-way and at the end: their partitions rewritten
            t0 = time.monotonic()
            assert p.chains() == 0
            others["chains"] += time.monotonic() - t0
    t0 = time.monotonic()
    assert p.validate() in (0, 1)
    others["validate"] += time.monotonic() - t0
    t0 = time.monotonic()
    code, _ = p.gc("--older-than", "1s", "--allow-short-grace")
    assert code in (0, 1), code
    others["gc"] += time.monotonic() - t0
    print(f"\n{RUNS} index runs: {sum(seconds):.1f}s in all, first {seconds[0]:.1f}s, "
          f"median {sorted(seconds)[RUNS // 2]:.2f}s, slowest after the first {max(seconds[1:]):.2f}s; "
          + ", ".join(f"{k} {v:.1f}s" for k, v in others.items()))
    return Built(base, src, p.roots, p.warehouse, seconds, jobs)


def _other_job_id(job_id: str) -> str:
    for i in range(1, 100):
        candidate = f"{i:02x}" + job_id[2:]
        if job_bucket(candidate) != job_bucket(job_id):
            return candidate
    raise AssertionError("no job id in another bucket")


def _change(job: Path, run: int) -> None:
    """One storage change per run: an orphan file in shared/, a copied checkpoint, the copies removed."""
    step = (run // 2) % 3
    if step == 0:
        (job / "shared").mkdir(exist_ok=True)
        (job / "shared" / f"orphan-{run}").write_bytes(b"x" * (run + 1))
    elif step == 1:
        newest = max((d for d in job.glob("chk-*") if int(d.name[4:]) < 100), key=lambda d: int(d.name[4:]))
        shutil.copytree(newest, job / f"chk-{100 + run}")
    else:
        for copied in job.glob("chk-1??"):
            shutil.rmtree(copied)


def _copy(built: Built, tmp_path: Path) -> Warehouse:
    dest = tmp_path / "warehouse"
    shutil.copytree(local(built.warehouse.uri), dest)
    return Warehouse(str(dest))


# -- what the tests look at ------------------------------------------------------------------------

def _stored(wh: Warehouse, name: str) -> Counter:
    """Data files on storage per partition directory ("" for unpartitioned tables)."""
    table = local(wh.table_uri(name))
    counts: Counter = Counter()
    for dirpath, dirs, files in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        rel = os.path.relpath(dirpath, table)
        counts[("" if rel == "." else rel)] += sum(1 for f in files if f.endswith(".parquet"))
    return +counts


def _live(wh: Warehouse, name: str) -> dict[tuple[str, ...], int]:
    state = delta_log.load_state(wh, name)
    return {k: len(v) for k, v in state.files_by_partition().items()}


def _paths(wh: Warehouse, name: str, version: int | None) -> set[str]:
    return {f.path for f in delta_log.load_state(wh, name, version).files}


def _stored_paths(wh: Warehouse, name: str) -> set[str]:
    table = local(wh.table_uri(name))
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet") if p.relative_to(table).parts[0][0] not in "_."}


def _present(wh: Warehouse) -> list[str]:
    return [t.name for t in ALL_TABLES if delta_log.table_exists(wh, t.name)]


def _rows(table: pa.Table) -> list[tuple]:
    keep = [c for c in table.column_names if c not in RUN_COLUMNS]
    return canonical(table.select(keep).to_pylist())


def _answers(wh: Warehouse) -> dict[str, Any]:
    """Every table as a reader sees it: the index tables at the cut, the others at their latest."""
    _, versions = cut.pin_cut(wh, [t.name for t in INDEX_TABLES])
    reader = TableReader(wh, versions)
    return {"cut": versions, **{name: canonical(reader.read(name).to_pylist()) for name in _present(wh)}}


def _explained(wh: Warehouse, built: Built) -> list[dict]:
    job = built.jobs[0]
    newest = max(job.glob("chk-*"), key=lambda d: int(d.name[4:]))
    return [explain(uri(p), wh).to_mapping() for p in (job, newest, job / "shared")]


def _derived(wh: Warehouse) -> dict[str, list[tuple]]:
    reader = TableReader(wh)
    return {name: _rows(reader.read(name)) for name in ("dependencies", "pins", "validation_results",
                                                         "validation_jobs")}


def _tree(wh: Warehouse) -> dict[str, float]:
    root = local(wh.uri)
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def _versions(wh: Warehouse) -> dict[str, int | None]:
    return {t.name: delta_log.latest_version(wh, t.name) for t in ALL_TABLES}


# -- tests -----------------------------------------------------------------------------------------

@slow
def test_repeated_runs_compact_and_vacuum_to_one_file_per_partition_with_equal_answers(spark, built, tmp_path):
    """The warehouse of RUNS index runs and two chains runs: maintenance compacts every partition to one file,
    vacuums every replaced one, and every reader and job answers as before."""
    wh = _copy(built, tmp_path)
    present = _present(wh)
    assert present == [t.name for t in ALL_TABLES if t.name not in ABSENT]
    stored_before = {name: _stored(wh, name) for name in present}
    for name in REWRITTEN:
        assert len(stored_before[name]) >= 2 and all(n > 1 for n in stored_before[name].values()), name
    for name in ("index_runs", "chains_runs", "gc_runs"):   # one file per appended audit row
        assert sum(_live(wh, name).values()) > 1, name
    assert sum(_live(wh, "index_runs").values()) == RUNS
    answers, explained, derived = _answers(wh), _explained(wh, built), _derived(wh)
    spark_runs = _spark_rows(spark, wh, "index_runs")

    t0 = time.monotonic()
    report = maintain_warehouse(wh, retention=timedelta(0), now=datetime.now(timezone.utc) + LATER)
    seconds = time.monotonic() - t0
    print(f"\nmaintenance of {len(present)} tables: {seconds:.2f}s\n{report.summary()}")

    assert {t.name for t in report.tables if t.outcome is TableOutcome.ABSENT} == set(ABSENT)
    assert all(t.outcome is TableOutcome.MAINTAINED for t in report.tables if t.name in present)
    for name in present:
        live = _live(wh, name)
        assert all(n <= 1 for n in live.values()), (name, live)
        # On storage: exactly the files of the latest version and of the pinned versions (an audit
        # row's table_versions may name a version compaction just replaced: its files stay).
        t = report.table(name)
        needed = _paths(wh, name, None) | {f for p in t.pins for f in _paths(wh, name, p.version)}
        assert _stored_paths(wh, name) == needed, name
        stored = _stored(wh, name)
        if not [p for p in t.pins if p.version < t.version_after]:
            assert sum(stored.values()) == sum(live.values()) and all(n <= 1 for n in stored.values()), name
        assert (t.files_after, t.stored_files_after) == (sum(live.values()), sum(stored.values()))
        assert t.stored_files_before == sum(stored_before[name].values())
        assert t.checkpoint_version == t.version_after
    assert report.table("index_runs").files_compacted == RUNS and report.table("index_runs").files_added == 1
    stored_total = sum(sum(c.values()) for c in stored_before.values())
    assert report.stored_files_before == stored_total
    assert report.files_vacuumed == stored_total + report.files_added - report.stored_files_after
    # Vacuum took away what the runs replaced: files of every table written more than once, and in all several per
    # index run (each replaced its job's partition of the four index tables and added an audit row; pinned versions
    # keep some): 34 at six runs, the bar scales with RUNS.
    assert all(report.table(n).files_vacuumed > 0 for n in (*REWRITTEN, "index_runs", "chains_runs", "gc_runs"))
    assert report.files_vacuumed > 3 * RUNS and report.bytes_vacuumed > 0

    # Readers answer exactly as before: every table (the index tables at the cut), explain, and
    # the Spark data source over delta-rs' compacted files.
    assert _answers(wh) == answers
    assert _explained(wh, built) == explained
    assert _spark_rows(spark, wh, "index_runs") == spark_runs
    # ... and so do the jobs: chains and validation recomputed on the maintained warehouse.
    p = DrPipeline(spark, wh, built.roots, tmp_path)
    assert p.chains() == 0
    assert p.validate() in (0, 1)
    assert _derived(wh) == derived
    # The next index run over unchanged storage sees no torn cut (maintenance commits keep rows).
    versions = {t.name: delta_log.latest_version(wh, t.name) for t in INDEX_TABLES}
    result = p.index()
    assert result.status == "succeeded" and result.repairs == () and result.units_rewritten == 0
    assert {t.name: delta_log.latest_version(wh, t.name) for t in INDEX_TABLES} == versions


def _spark_rows(spark: Any, wh: Warehouse, name: str) -> list[tuple]:
    from statekeeper.tables.delta_spark import DeltaSparkEngine

    frame = DeltaSparkEngine().read(spark, wh, name)
    return canonical([r.asDict(recursive=True) for r in frame.collect()])


@slow
def test_dry_run_changes_nothing_and_reports_what_a_run_would_do(built, tmp_path):
    wh = _copy(built, tmp_path)
    tree, versions = _tree(wh), _versions(wh)
    later = datetime.now(timezone.utc) + LATER

    planned = maintain_warehouse(wh, retention=timedelta(0), dry_run=True, now=later)

    assert _tree(wh) == tree and _versions(wh) == versions
    assert planned.dry_run
    assert all(t.outcome is TableOutcome.DRY_RUN for t in planned.tables if t.name in _present(wh))
    assert "dry run" in planned.summary()
    runs = planned.table("index_runs")
    assert (runs.files_compacted, runs.files_added, runs.partitions_compacted) == (RUNS, 1, 1)
    assert all(t.version_after == t.version_before for t in planned.tables)
    done = maintain_warehouse(wh, retention=timedelta(0), now=later)
    for t in planned.tables:
        real = done.table(t.name)
        if t.files_compacted == 0:   # what vacuum deletes, exactly (compaction adds the files it replaces)
            assert (real.files_vacuumed, real.bytes_vacuumed) == (t.files_vacuumed, t.bytes_vacuumed), t.name
            assert real.stored_files_after == t.stored_files_after, t.name
        assert real.files_compacted == t.files_compacted and real.files_after == t.files_after, t.name


@slow
def test_retention_floor_refuses_before_changing_anything(spark, built, tmp_path):
    wh = _copy(built, tmp_path)
    # Index one more root: the index tables move on, while the newest chains, validation and GC
    # rows still name the versions before.
    other = tmp_path / "other" / "checkpoints"
    (other / "job" / "shared").mkdir(parents=True)
    (other / "job" / "shared" / "f").write_bytes(b"data")
    assert run_index(spark, [str(other)], wh).status == "succeeded"
    tree, versions = _tree(wh), _versions(wh)
    later = datetime.now(timezone.utc) + LATER

    with pytest.raises(RetentionFloorError) as caught:
        maintain_warehouse(wh, retention=timedelta(0), now=later)
    message = str(caught.value)
    first = caught.value.pins[0]
    assert first.table == "files" and f"files version {first.version}" in message
    assert first.version == versions["files"] - 1 and "chains_runs run" in message
    assert f"version {first.removed_by}" in message and "needs a retention of at least" in message
    assert _tree(wh) == tree and _versions(wh) == versions       # nothing changed, no table at all

    # With the clock as it is, GC's grace period pins `references` of every index run too.
    pins = retention_pins(wh)["references"]
    assert {p.version for p in pins} == set(range(versions["references"] + 1))
    assert any("grace period" in p.pinned_by for p in pins)
    with pytest.raises(RetentionFloorError, match="grace period"):
        maintain_warehouse(wh, retention=timedelta(0))
    # A retention longer than the pinned versions are old is accepted, and keeps their files.
    report = maintain_warehouse(wh, retention=timedelta(hours=1))
    assert report.files_vacuumed == 0 and report.files_compacted > 0
    reader = TableReader(wh, {"files": first.version})
    assert reader.read("files").num_rows > 0


def test_negative_retention_and_unknown_tables_are_refused(tmp_path):
    wh = Warehouse(str(tmp_path / "warehouse"))
    with pytest.raises(MaintenanceOptionsError, match="negative"):
        maintain_warehouse(wh, retention=timedelta(hours=-1))
    with pytest.raises(MaintenanceOptionsError, match="no Statekeeper table named 'nope'"):
        maintain_warehouse(wh, tables=["files", "nope"])
    empty = maintain_warehouse(wh)
    assert all(t.outcome is TableOutcome.ABSENT for t in empty.tables) and len(empty.tables) == len(ALL_TABLES)


@slow
def test_absent_tables_are_skipped(built, tmp_path):
    wh = _copy(built, tmp_path)
    shutil.rmtree(local(wh.table_uri("gc_actions")))     # dr_files is absent already: no DR copy ran
    report = maintain_warehouse(wh, retention=timedelta(0), now=datetime.now(timezone.utc) + LATER,
                                tables=["gc_actions", "dr_files", "index_runs", "gc_runs"])
    assert [t.name for t in report.tables] == ["index_runs", "gc_actions", "gc_runs", "dr_files"]  # catalog order
    assert {t.name: t.outcome for t in report.tables} == {
        "index_runs": TableOutcome.MAINTAINED, "gc_actions": TableOutcome.ABSENT, "gc_runs": TableOutcome.MAINTAINED,
        "dr_files": TableOutcome.ABSENT}
    assert [t.name for t in report.skipped] == ["gc_actions", "dr_files"]
    assert "absent (skipped): gc_actions, dr_files" in report.summary()
    assert report.to_mapping()["skipped"] == ["gc_actions", "dr_files"]
    assert sum(_live(wh, "index_runs").values()) == 1
    assert delta_log.latest_version(wh, "files") == delta_log.latest_version(built.warehouse, "files")


@slow
def test_second_run_has_nothing_to_do(built, tmp_path):
    wh = _copy(built, tmp_path)
    later = datetime.now(timezone.utc) + LATER
    first = maintain_warehouse(wh, retention=timedelta(0), now=later)
    assert first.files_vacuumed > 0 and first.files_compacted > 0
    tree, versions = _tree(wh), _versions(wh)

    second = maintain_warehouse(wh, retention=timedelta(0), now=later)

    assert (second.files_compacted, second.files_added, second.files_vacuumed) == (0, 0, 0)
    assert all(t.version_after == t.version_before and t.checkpoint_version is None for t in second.tables)
    assert _versions(wh) == versions and _tree(wh) == tree


def _age(path: Path, days: float) -> None:
    """Backdate everything below `path` (and it) by `days`, as if nothing had written there since."""
    then = time.time() - days * 86400
    for p in [*sorted(path.rglob("*"), reverse=True), path]:
        os.utime(p, (then, then))


@slow
def test_files_of_killed_writes_go_once_older_than_the_retention(spark, built, tmp_path):
    """A driver killed after Delta's writer wrote its data files and before the commit leaves them in the table's
    partition directories, named by no version. Maintenance's vacuum (full) deletes them once older than the
    retention; younger ones stay (they may belong to a write still running), and no answer changes."""
    wh = _copy(built, tmp_path)
    table = local(wh.table_uri("references"))
    [partition] = sorted(p for p in table.glob("root_id=*/bucket=*") if p.is_dir())[:1]
    rows = spark.createDataFrame([(i, f"x{i}") for i in range(60)], "n INT, s STRING")
    for name in ("old", "fresh"):
        # what a killed write leaves: Spark's output files, never committed
        rows.coalesce(1).write.parquet(f"file://{tmp_path / name}")
        [part] = (tmp_path / name).glob("part-*.parquet")
        os.replace(part, partition / f"part-killed-{name}.zstd.parquet")
    _age(partition / "part-killed-old.zstd.parquet", 8)
    answers = _answers(wh)

    planned = maintain_warehouse(wh, dry_run=True)
    assert (partition / "part-killed-old.zstd.parquet").exists()
    assert planned.table("references").files_vacuumed >= 1
    maintain_warehouse(wh)   # the default retention: a week
    assert not (partition / "part-killed-old.zstd.parquet").exists()
    assert (partition / "part-killed-fresh.zstd.parquet").exists()
    assert _answers(wh) == answers


class _ConcurrentWriter(logging.Handler):
    """A writer that commits to `table` the moment maintenance announces its compaction: it drops
    the table's oldest data file from the table, as a concurrent run replacing rows would."""

    def __init__(self, wh: Warehouse, table: str) -> None:
        super().__init__(logging.INFO)
        self.wh, self.table, self.committed = wh, table, None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.committed is None and "compacting" in message and message.endswith(f"/{self.table}"):
            state = delta_log.load_state(self.wh, self.table)
            oldest = min(state.files, key=lambda f: f.modification_time)
            self.committed = delta_log.commit(self.wh, INDEX_RUNS, [], [oldest], read_version=state.version).version


@slow
def test_a_concurrent_commit_skips_the_table_and_the_others_go_on(built, tmp_path):
    wh = _copy(built, tmp_path)
    logger = logging.getLogger("test.maintenance.concurrent")
    writer = _ConcurrentWriter(wh, "index_runs")
    logger.addHandler(writer)
    logger.setLevel(logging.INFO)
    try:
        report = maintain_warehouse(wh, retention=timedelta(0), now=datetime.now(timezone.utc) + LATER, log=logger)
    finally:
        logger.removeHandler(writer)

    assert writer.committed is not None
    runs = report.table("index_runs")
    assert runs.outcome is TableOutcome.CONFLICT and "concurrent commit" in runs.skipped
    assert runs.version_after == writer.committed and runs.files_after == RUNS - 1   # as the writer left it
    assert [t.name for t in report.skipped if t.outcome is TableOutcome.CONFLICT] == ["index_runs"]
    others = [t for t in report.tables if t.name in _present(wh) and t.name != "index_runs"]
    assert others and all(t.outcome is TableOutcome.MAINTAINED for t in others)
    assert report.table("chains_runs").files_after == 1
    # delta-rs left the compacted file of the failed commit behind; the report names it.
    assert sum(_stored(wh, "index_runs").values()) == RUNS + 1 and "no version names them" in runs.notes[0]


def test_writers_keep_old_commits_when_they_checkpoint(spark, tmp_path):
    """Delta deletes commit files older than the log retention (30 days) whenever it writes a checkpoint; the jobs'
    writes turn that off (new tables by the session's defaults, older ones before their first write), so pinned old
    versions stay readable."""
    from deltalake import DeltaTable

    from statekeeper.tables.delta_spark import KEEP_LOGS_PROPERTY, DeltaSparkEngine
    from tests.tables.writes import append_rows

    rows = pa.Table.from_pylist([{"run_id": "r", "status": "ok"}])
    spec = TableSpec("log_test", rows.schema)
    for name, create in (("new", DeltaSparkEngine().append_rows), ("older", None)):
        wh = Warehouse(str(tmp_path / name))
        if create is None:
            append_rows(wh, spec, rows)     # a table no Spark job created: no property
        else:
            create(spark, wh, spec, rows)
        DeltaTable(wh.delta_location(spec.name)).alter.set_table_properties({"delta.checkpointInterval": "2"})
        log_dir = local(wh.table_uri(spec.name)) / "_delta_log"
        month_ago = time.time() - 40 * 86400
        for f in log_dir.iterdir():
            os.utime(f, (month_ago, month_ago))
        for _ in range(3):
            DeltaSparkEngine().append_rows(spark, wh, spec, rows)
        assert any(f.name.endswith(".checkpoint.parquet") for f in log_dir.iterdir()), name
        assert delta_log.load_state(wh, spec.name, 0).version == 0, name    # the first commit is still there
        assert DeltaTable(wh.delta_location(spec.name)).metadata().configuration[KEEP_LOGS_PROPERTY] == "false"


def test_the_library_imports_neither_deltalake_spark_nor_airflow():
    code = ("import sys, statekeeper.tables.maintenance; "
            "print(sorted(m for m in ('deltalake', 'pyspark', 'airflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    assert out.strip() == "[]"
