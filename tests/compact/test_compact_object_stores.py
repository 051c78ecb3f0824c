"""Compaction on object stores (S3: the session's SeaweedFS; GCS and Azure: their emulators): both
placements, re-runs, and proof by restore.

Relocated copies of job A's directory of the newest version's `inline_heavy` and `incremental_inline`
stores live in a bucket. The newest checkpoint of each is compacted through the store's real FileIO:
inline_heavy into a new `compacted/chk-N/` directory, incremental_inline in place (the original copied
server-side to `_metadata.statekeeper-original`, the result installed by one write). A re-run recognises
both results. The job directories are then downloaded (paths rewritten to the local copy) and both results
restore in real Flink: the three stores' six results in one JVM at the module's end.
"""
from __future__ import annotations

import pytest

import tests.harness as harness
from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
from statekeeper.tables.vocabulary import CompactionStatus
from statekeeper.compact.plan import BACKUP_NAME, CANDIDATE_NAME, Placement
from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO
from tests.chains.support import relocate_store
from tests.compact.support import RestoreBatch, download_store, local
from tests.plugins.object_stores import azure_uri, make_azure_container, make_gcs_bucket
from tests.plugins.s3 import make_bucket

pytestmark = [pytest.mark.flink, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
CASES = {"inline_heavy": Placement.NEW_DIRECTORY, "incremental_inline": Placement.IN_PLACE}


# marked by hand: the tiers come from fixture names, and getfixturevalue hides these from them
@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs),
                        pytest.param("azure", marks=pytest.mark.azure)])
def object_store(request):
    """(storage settings, a fresh bucket's base URI) on one of the stores."""
    if request.param == "s3":
        config = request.getfixturevalue("s3_config")
        return config, f"s3://{make_bucket(config, 'compact')}"
    if request.param == "gcs":
        config = request.getfixturevalue("gcs_config")
        return config, f"gs://{make_gcs_bucket(config, 'compact')}"
    config = request.getfixturevalue("azure_config")
    return config, azure_uri(make_azure_container(config, "compact"))


@pytest.fixture(scope="module")
def restores():
    """The results of all three stores, restored together when the module ends (tests/compact/support.py)."""
    batch = RestoreBatch(VERSION)
    yield batch
    batch.verify()


def test_both_placements_restore(flink_fixture, object_store, restores, request, tmp_path_factory):
    config, base = object_store
    raw = RoutingFileIO(config)
    fileio = GuardedFileIO(raw, Roots([f"{base}/{s}/checkpoints" for s in CASES]))
    sources = {}
    for scenario, placement in CASES.items():
        fixture = flink_fixture(VERSION, scenario)
        newest = fixture.retained_checkpoints("A")[-1]
        # Only job A's directory goes up (and comes back): its newest checkpoint is what is compacted and
        # restored, and it names nothing outside that directory (relocate_store fails on a path it cannot map).
        # inline_heavy's job B (threshold 0: ~345 files, nothing to move) proves nothing here.
        job = newest.parent.relative_to(fixture.root).as_posix()
        prefix = relocate_store(newest.parent, f"{base}/{scenario}/{job}", raw)
        src = f"{prefix}/{newest.name}/_metadata"
        info = fileio.stat(src)
        req = SnapshotRequest(src, info.size, info.etag, placement, 1024)
        out = compact_snapshot(fileio, req)
        assert out.outcome is CompactionStatus.COMPACTED, out
        assert out.metadata_bytes_after < out.metadata_bytes_before and out.files_written > 0
        assert fileio.sha256(out.result_uri) == out.result_sha256
        assert not fileio.exists(out.result_uri.rsplit("/", 1)[0] + "/" + CANDIDATE_NAME)
        if placement is Placement.IN_PLACE:
            assert out.result_uri == src and out.backup_uri == src.rsplit("/", 1)[0] + "/" + BACKUP_NAME
            assert fileio.stat(out.backup_uri).size == info.size
        else:
            assert "/compacted/" in out.result_uri and fileio.stat(src).etag == info.etag
        again = compact_snapshot(fileio, req)
        expected = CompactionStatus.RECOVERED if placement is Placement.IN_PLACE else CompactionStatus.ALREADY_COMPACTED
        assert again.outcome is expected and again.result_sha256 == out.result_sha256, again
        sources[scenario] = (prefix, out.result_uri)

    # the copies outlive this test: the module's teardown restores all stores' results in one JVM
    target = tmp_path_factory.mktemp(f"restore-{request.node.callspec.id}")
    for scenario, (prefix, result) in sources.items():
        root = download_store(prefix, target / scenario, raw)
        restores.add(request, local(root + result[len(prefix):]).parent, scenario, "A")
