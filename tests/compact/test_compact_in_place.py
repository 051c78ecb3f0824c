"""--in-place compaction: a crash at any write leaves the original or the verified result; stopped jobs only.

On the newest harness Flink version, with `incremental_inline` (RocksDB incremental, 1 MiB inline
threshold): the compaction is killed (SIGKILL, a real process) right after each of its writes to
storage in turn, each time on a fresh copy: in `make test` where the state differs (the first and the last
moved file, the candidate, the backup, the install, the candidate's removal), every other moved file under
the full matrix. After every kill the installed `_metadata` is the original or a result that verifies
against the original; a re-run then completes (recovering an installed result), and a sample of the
results restores in real Flink. Through the Spark job: a job that wrote recently is refused, a stopped one
is compacted in place and restores, and a corrupt `_metadata` is refused with the codec's message before
anything is written. The module's restores run in one JVM at its end.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
from statekeeper.tables.vocabulary import CompactionStatus
from statekeeper.compact.plan import BACKUP_NAME, CANDIDATE_NAME, Placement, plan_compaction
from statekeeper.format import read_metadata
from statekeeper.storage import file_io
from tests.compact.support import RestoreBatch, compact_pipeline, compactions, listing, local, relocated, sha256, uri

pytestmark = [pytest.mark.flink, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
SCENARIO = "incremental_inline"
REPO = Path(__file__).resolve().parents[2]


def _newest(store: str, fixture) -> Path:
    chk = fixture.retained_checkpoints("A")[-1]
    return local(store) / chk.relative_to(fixture.root) / "_metadata"


def _request(metadata: Path) -> SnapshotRequest:
    info = file_io().stat(uri(metadata))
    return SnapshotRequest(uri(metadata), info.size, info.etag, Placement.IN_PLACE, 1024)


def _moved(metadata: Path) -> int:
    """Moved files of its in-place compaction: its storage changes are these, then the candidate, the backup,
    the install and the candidate's removal (n + 4). Where it lies does not change the plan's size."""
    model = read_metadata(metadata, uri(metadata))
    return len(plan_compaction(model, uri(metadata), Placement.IN_PLACE, min_bytes=1024, fingerprint="x").files)


# Kill after the K-th write, K per point from n moved files (tests/README.md, "Kill points where the state
# differs"). Killed within the moved files, the source is in force beside orphans: the first and the last show
# both ends of that; the 2nd..(n-1)th only leave more or fewer orphans of the same kind (full matrix).
KILL_POINTS = {
    "first-file": lambda n: [1],
    "last-file": lambda n: [n],
    "candidate": lambda n: [n + 1],
    "backup": lambda n: [n + 2],
    "install": lambda n: [n + 3],
    "candidate-removed": lambda n: [n + 4],
    "between-files": lambda n: list(range(2, n)),
}
RESTORED = {"first-file", "backup", "install", "candidate-removed"}   # each a different state before the re-run


def _backdate(root: Path, hours: float) -> None:
    """A stopped job: nothing under `root` written in the last `hours`."""
    then = time.time() - hours * 3600
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            os.utime(Path(dirpath) / n, (then, then), follow_symlinks=False)


@pytest.fixture(scope="module")
def fixture(flink_fixture):
    return flink_fixture(VERSION, SCENARIO)


@pytest.fixture(scope="module")
def restores():
    """This module's results, restored together when it ends (tests/compact/support.py)."""
    batch = RestoreBatch(VERSION)
    yield batch
    batch.verify()


@pytest.mark.parametrize("point", [pytest.param(p, marks=pytest.mark.full_matrix) if p == "between-files" else p
                                   for p in KILL_POINTS])
def test_a_kill_after_any_write_leaves_the_original_or_the_verified_result(fixture, point, restores, request,
                                                                           tmp_path_factory):
    moved = _moved(fixture.retained_checkpoints("A")[-1] / "_metadata")
    assert moved > 2     # the first, the last and the ones between are three different kill points
    tmp_path = tmp_path_factory.mktemp(f"kill-{point}")     # restored at the module's end
    for k in KILL_POINTS[point](moved):
        store = relocated(fixture, tmp_path / f"k{k}")
        metadata = _newest(store, fixture)
        original = metadata.read_bytes()
        req = _request(metadata)
        proc = subprocess.run([sys.executable, "-m", "tests.compact.crash", req.source_uri, str(req.expected_size),
                               req.expected_etag or "", "in_place", str(k)], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": f"{REPO / 'include'}:{REPO}"}, timeout=120)
        assert proc.returncode == -9, (k, proc.returncode, proc.stdout, proc.stderr)
        now = metadata.read_bytes()
        if now != original:
            # installed: it must be the verified result (a re-run verifies it against the backup)
            assert (metadata.parent / BACKUP_NAME).read_bytes() == original
        out = compact_snapshot(file_io(), req)
        expected = CompactionStatus.RECOVERED if now != original else CompactionStatus.COMPACTED
        assert out.outcome is expected, (k, out)
        assert (metadata.parent / BACKUP_NAME).read_bytes() == original
        assert not (metadata.parent / CANDIDATE_NAME).exists()
        assert len(metadata.read_bytes()) < len(original)
        if point in RESTORED:
            restores.add(request, metadata.parent, SCENARIO, "A")


def test_an_unsupported_or_corrupt_metadata_is_refused_before_anything_is_written(fixture, tmp_path):
    store = relocated(fixture, tmp_path / "bad")
    metadata = _newest(store, fixture)
    original = metadata.read_bytes()
    data = bytearray(original)
    data[4:8] = (7).to_bytes(4, "big")          # version 7 (FLIP-600): refused by name, as an unknown version
    metadata.write_bytes(bytes(data))
    before = listing([store])
    for placement in Placement:
        info = file_io().stat(uri(metadata))
        out = compact_snapshot(file_io(), SnapshotRequest(uri(metadata), info.size, info.etag, placement, 1024))
        assert out.outcome is CompactionStatus.FAILED and "UnknownMetadataVersionError" in out.problem, out
        assert "version 7" in out.problem
    metadata.write_bytes(original[: len(original) // 2])
    info = file_io().stat(uri(metadata))
    out = compact_snapshot(file_io(), SnapshotRequest(uri(metadata), info.size, info.etag, Placement.IN_PLACE, 1024))
    assert out.outcome is CompactionStatus.FAILED and "TruncatedMetadataError" in out.problem, out
    after = listing([store])
    assert set(after) == set(before)


@pytest.mark.spark
def test_in_place_through_the_job_refuses_a_running_looking_job_and_compacts_a_stopped_one(spark, fixture, restores,
                                                                                            request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("job")     # restored at the module's end
    store = relocated(fixture, tmp_path / "src")
    roots = [f"{store}/checkpoints", f"{store}/savepoints"]
    metadata = _newest(store, fixture)
    original = metadata.read_bytes()
    # Backdated before the one index/chains/validate: the job last wrote 30 min ago. Under the default
    # --quiet-period (1h) that looks like a running job and is refused; a shorter one finds it stopped.
    # (Backdating after indexing would change the local fingerprints the index recorded: a second prepare.)
    _backdate(local(store), hours=0.5)
    p = compact_pipeline(spark, tmp_path, roots)
    p.prepare()
    code, result = p.compact("--snapshot", uri(metadata.parent), "--in-place")
    assert code == 1 and result["failed"] == 1, result
    row, = compactions(p.warehouse, result["run_id"])
    assert row["status"] == "refused" and "--quiet-period" in row["problem"]
    assert metadata.read_bytes() == original and not (metadata.parent / BACKUP_NAME).exists()

    code, result = p.compact("--snapshot", uri(metadata.parent), "--in-place", "--quiet-period", "15m")
    assert code == 0, result
    row, = compactions(p.warehouse, result["run_id"])
    assert row["status"] == "compacted" and row["result_metadata_uri"] == uri(metadata)
    assert row["backup_uri"] == uri(metadata.parent / BACKUP_NAME)
    assert sha256(metadata) == row["result_sha256"] and len(metadata.read_bytes()) < len(original)
    assert (metadata.parent / BACKUP_NAME).read_bytes() == original
    # the re-indexed store: the result parses, its new files are referenced, the backup is an orphan for GC
    p.refresh()
    from tests.compact.support import table

    snap = {s["uri"]: s for s in table(p.warehouse, "snapshots")}[uri(metadata)]
    assert snap["status"] == "ok" and snap["metadata_size"] == len(metadata.read_bytes())
    # the replaced original becomes a GC candidate only by GC's rules: an unreferenced file, past the grace
    # period (1s here); the new files are referenced and stay
    from tests.gc.support import SHORT, actions

    code, gc = p.gc(*SHORT)
    assert code == 0, gc
    planned = {a["uri"]: a for a in actions(p.warehouse, gc["run_id"])}
    assert planned[uri(metadata.parent / BACKUP_NAME)]["reason"] == "orphan"
    new = {uri(f) for f in metadata.parent.iterdir()} - {uri(metadata.parent / BACKUP_NAME)}
    assert not new & set(planned)
    restores.add(request, metadata.parent, SCENARIO, "A")


@pytest.mark.spark
def test_a_corrupt_snapshot_named_explicitly_is_refused_with_the_codec_message(spark, fixture, tmp_path):
    store = relocated(fixture, tmp_path / "src")
    roots = [f"{store}/checkpoints", f"{store}/savepoints"]
    metadata = _newest(store, fixture)
    metadata.write_bytes(metadata.read_bytes()[:1000])
    p = compact_pipeline(spark, tmp_path, roots)
    p.prepare()
    before = listing(roots)
    code, result = p.compact("--snapshot", uri(metadata.parent))
    assert code == 2, result
    assert "cannot be compacted" in result["error"] and "Truncated" in result["error"], result["error"]
    assert listing(roots) == before
    shutil.rmtree(local(store))
