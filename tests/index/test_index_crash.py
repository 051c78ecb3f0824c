"""Crash consistency of the index tables: SIGKILL at every commit boundary, then heal.

The index commits `files`, `snapshots`, `references`, `inline_state` one after another and then its
`index_runs` row (statekeeper.tables.cut). Each test runs the real index job as its own process
tree (spark-submit's way: a driver, a JVM, Python workers) on a copy of a real Flink store to which
a new checkpoint was just added, kills it at one boundary (faults from tests/faults/sitecustomize.py),
and then shows:

* a reader at no point sees a torn cut: for every parsed snapshot of the cut, `reference_count`
  equals its rows in `references`, and the cut is the old one unless the audit row landed;
* no committed data file was deleted (every table's latest version is readable);
* the next plain run repairs and indexes: the new checkpoint is in the cut with all its
  references, each of them listed in `files` (no live file looks orphaned).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

import tests.harness as harness
from statekeeper.format import extract_references, open_metadata
from statekeeper.tables import Warehouse
from statekeeper.tables.cut import latest_cut
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store
from tests.index.support import TABLES, run_index
from tests.plugins.spark import job_process_env

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "faults"


@dataclass
class Case:
    """A relocated copy of a real store, indexed without its newest checkpoint (and the shared files
    only that checkpoint uses), which is then put back: the next run has a new snapshot to add."""

    store: Path
    wh: Warehouse
    newest: str                 # URI of the newest checkpoint's _metadata
    new_files: list[str]        # shared files only it references
    before: object              # the cut of the first run


@pytest.fixture(scope="module")
def held_back(flink_fixture) -> tuple[Path, str, list[str]]:
    """(source root, newest checkpoint dir, shared files only it uses), relative to the root."""
    root = flink_fixture(VERSION, "incremental").root / "checkpoints"
    metadata = sorted(root.rglob("chk-*/_metadata"), key=lambda p: int(p.parent.name.split("-")[1]))
    refs = {m: {r.uri for r in extract_references(open_metadata(m), normalize_uri(str(m))).files}
            for m in metadata}
    older = set().union(*(refs[m] for m in metadata[:-1]))
    prefix = normalize_uri(str(root)) + "/"
    only_newest = sorted(u[len(prefix):] for u in refs[metadata[-1]] if u not in older and "/shared/" in u)
    assert only_newest, "the newest checkpoint should add shared files of its own"
    return root, metadata[-1].parent.relative_to(root).as_posix(), only_newest


@pytest.fixture(scope="module")
def golden(spark, held_back, tmp_path_factory) -> tuple[Path, Case]:
    """The indexed state every test starts from, built once at a fixed place (`<base>/work`) and
    saved beside it: `_metadata` and the tables hold absolute paths, so each test restores the copy
    to the very same place instead of relocating and indexing again."""
    source, newest_dir, new_files = held_back
    base = tmp_path_factory.mktemp("crash")
    work = base / "work"
    store, held = work / "store", work / "held"
    relocate_store(source, str(store))
    for rel in [newest_dir, *new_files]:
        (held / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(store / rel, held / rel)
    wh = Warehouse(str(work / "warehouse"))
    first = run_index(spark, [str(store)], wh)
    assert first.status == "succeeded"
    shutil.copytree(work, base / "golden", symlinks=True)
    uri = normalize_uri(str(store))
    return base, Case(store, wh, f"{uri}/{newest_dir}/_metadata", [f"{uri}/{f}" for f in new_files],
                      latest_cut(wh))


@pytest.fixture
def case(golden) -> Case:
    """The golden state restored at its place, with the newest checkpoint put back."""
    base, case = golden
    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base / "golden", work, symlinks=True)
    shutil.copytree(work / "held", case.store, dirs_exist_ok=True)
    return case


def crash_run(store: Path, wh: Warehouse, fault: str, tmp_path: Path) -> tuple[int, str, str]:
    """The index job in its own session (process group), with `fault` armed."""
    marker = tmp_path / "fault-fired"
    env = job_process_env(FAULTS, STATEKEEPER_FAULT=fault, STATEKEEPER_FAULT_MARKER=str(marker))
    proc = subprocess.run(
        [sys.executable, str(REPO / "spark_jobs" / "index_checkpoints.py"), "--roots", str(store),
         "--warehouse", wh.uri, "--master", "local[1]", "--progress-interval", "0"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, start_new_session=True)
    fired = marker.read_text() if marker.exists() else ""
    return proc.returncode, fired, proc.stderr[-3000:]


def cut_tables(wh: Warehouse) -> tuple[object, dict]:
    cut = latest_cut(wh)
    assert cut is not None
    tables = {name: DeltaTable(wh.delta_location(name), version=cut.versions[name]).to_pyarrow_table()
              for name in ("files", "snapshots", "references")}
    return cut, tables


def assert_consistent(wh: Warehouse) -> tuple[object, dict]:
    """What every reader checks: the cut's references hold each parsed snapshot's references."""
    cut, tables = cut_tables(wh)
    snaps, refs = tables["snapshots"], tables["references"]
    counts = {}
    for uri in refs.column("snapshot_uri").to_pylist():
        counts[uri] = counts.get(uri, 0) + 1
    for row in snaps.filter(pc.equal(snaps.column("status"), "ok")).to_pylist():
        assert row["reference_count"] == counts.get(row["uri"], 0), (row["uri"], cut)
    # Every table's latest version is readable: no commit lost its data files.
    for name in TABLES:
        if os.path.isdir(wh.delta_location(name)):
            DeltaTable(wh.delta_location(name)).to_pyarrow_table()
    return cut, tables


def assert_newest_indexed(case: Case) -> None:
    _, tables = assert_consistent(case.wh)
    snaps = tables["snapshots"].to_pylist()
    assert any(r["uri"] == case.newest and r["status"] == "ok" for r in snaps), case.newest
    refs = tables["references"]
    mine = set(refs.filter(pc.equal(refs.column("snapshot_uri"), case.newest)).column("file_uri").to_pylist())
    listed = set(tables["files"].column("uri").to_pylist())
    for uri in case.new_files:
        assert uri in mine and uri in listed, uri   # referenced and listed: not an orphan


# Every boundary; `make test` kills at four of them, each a different state for the reader and the healer:
# nothing committed (before files), some tables ahead of the audited cut (after snapshots), every data table
# ahead with the audit row's data file written but not committed (before index_runs), the audit row landed
# (after index_runs). The other six only move the same tear to another table (the same restore of tables
# ahead, the same ignored uncommitted files); the full matrix (--full-matrix, nightly) kills at them too.
BOUNDARIES = [(when, table) for table in (*TABLES, "index_runs") for when in ("before", "after")]
IN_MAKE_TEST = {("before", "files"), ("after", "snapshots"), ("before", "index_runs"), ("after", "index_runs")}


@pytest.mark.parametrize("when,table", [
    pytest.param(w, t, id=f"{w}-{t}", marks=() if (w, t) in IN_MAKE_TEST else pytest.mark.full_matrix)
    for w, t in BOUNDARIES])
def test_sigkill_at_a_commit_boundary_never_shows_a_torn_cut_and_the_next_run_heals(
        spark, case, tmp_path, when, table):
    rc, fired, stderr = crash_run(case.store, case.wh, f"{when}:{table}:kill_all", tmp_path)
    assert fired, f"the fault {when}:{table} was never reached (rc {rc}): {stderr}"
    assert rc == -9, (rc, stderr)

    cut, _ = assert_consistent(case.wh)
    if (when, table) == ("after", "index_runs"):
        assert cut.run_id != case.before.run_id       # the audit row landed: the new cut is complete
    else:
        assert cut.run_id == case.before.run_id       # readers still see the last audited run

    healed = run_index(spark, [str(case.store)], case.wh)
    assert healed.status == "succeeded", healed.errors
    if (when, table) in {("after", "index_runs"), ("before", "files")}:
        assert healed.repairs == ()
    else:
        assert healed.repairs, "tables ahead of the audited run must be restored before planning"
    assert_newest_indexed(case)


def test_a_commit_that_landed_but_reported_an_error_is_kept(spark, case, tmp_path):
    """The client sees an error after the commit is in the log (a lost response): the run looks the
    commit up by its id and carries on; nothing of it is deleted."""
    rc, fired, stderr = crash_run(case.store, case.wh, "raise_after:snapshots:raise", tmp_path)
    assert fired and rc == 0, (rc, stderr)
    cut, _ = assert_consistent(case.wh)
    assert cut.status == "succeeded" and cut.run_id != case.before.run_id
    assert_newest_indexed(case)


def test_a_failure_after_a_commit_keeps_committed_files(spark, case, tmp_path):
    """The change set fails after some tables committed (here an error right after `snapshots` landed): the
    clean-up must not delete what already committed; the failed run's audit row says which tables committed,
    and the next run repairs."""
    rc, fired, stderr = crash_run(case.store, case.wh, "after:snapshots:raise", tmp_path)
    assert fired and rc == 3, (rc, stderr)
    runs = DeltaTable(case.wh.delta_location("index_runs")).to_pyarrow_table().to_pylist()
    failed = [r for r in runs if r["status"] == "failed"]
    assert len(failed) == 1 and "snapshots v" in failed[0]["errors"][0], failed
    assert_consistent(case.wh)
    healed = run_index(spark, [str(case.store)], case.wh)
    assert healed.status == "succeeded" and healed.repairs
    assert_newest_indexed(case)
