"""FileIO contract, run against local disk and a real S3 endpoint (SeaweedFS on loopback)."""
from __future__ import annotations

import io
import random
import uuid

import pytest

from statekeeper.storage import (
    DeleteReport,
    GuardedFileIO,
    LocalFileIO,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OutsideRootError,
    RootConfigError,
    RootNotFoundError,
    Roots,
    RoutingFileIO,
    StorageError,
    UnsupportedSchemeError,
    root_id_of,
)
from statekeeper.storage.s3 import S3FileIO


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs),
                        pytest.param("azure", marks=pytest.mark.azure)])
def store(request, tmp_path):
    """(FileIO, base URI) for an empty directory on each backend."""
    if request.param == "local":
        return RoutingFileIO(), f"file://{tmp_path}/store"
    if request.param == "gcs":
        return RoutingFileIO(request.getfixturevalue("gcs_config")), f"gs://{request.getfixturevalue('gcs_bucket')}/store"
    if request.param == "azure":
        from tests.plugins.object_stores import azure_uri

        container = request.getfixturevalue("azure_container")
        return RoutingFileIO(request.getfixturevalue("azure_config")), azure_uri(container, "store")
    config = request.getfixturevalue("s3_config")
    bucket = request.getfixturevalue("s3_bucket")
    return RoutingFileIO(config), f"s3://{bucket}/store"


def _put_tree(fio, base, names, payload=lambda n: n.encode()):
    for name in names:
        fio.write(f"{base}/{name}", payload(name))


def test_list_is_recursive_lazy_and_directory_scoped(store):
    fio, base = store
    _put_tree(fio, base, ["a/x", "a/sub/y", "ab/z", "top"])
    listing = fio.list(f"{base}/a")
    assert not isinstance(listing, (list, tuple))  # a generator, never a materialized listing
    infos = {i.uri: i for i in listing}
    assert set(infos) == {f"{base}/a/x", f"{base}/a/sub/y"}  # "a" does not list "ab"
    assert infos[f"{base}/a/x"].size == len(b"a/x")
    assert infos[f"{base}/a/x"].etag
    assert infos[f"{base}/a/x"].mtime.tzinfo is not None
    assert {i.uri for i in fio.list(base, recursive=False)} == {f"{base}/top"}
    assert {i.uri for i in fio.list(base)} == {f"{base}/{n}" for n in ["a/x", "a/sub/y", "ab/z", "top"]}


def test_list_of_missing_directory_is_empty(store):
    fio, base = store
    assert list(fio.list(f"{base}/nothing-here")) == []


def test_list_dirs_gives_child_directories_only(store):
    fio, base = store
    _put_tree(fio, base, ["j1/chk-1/_metadata", "j2/shared/s", "file-at-top"])
    assert list(fio.list_dirs(base)) == [f"{base}/j1", f"{base}/j2"]
    assert list(fio.list_dirs(f"{base}/j1")) == [f"{base}/j1/chk-1"]


def test_stat_and_missing_object(store):
    fio, base = store
    fio.write(f"{base}/f", b"hello")
    info = fio.stat(f"{base}/f")
    assert (info.uri, info.size) == (f"{base}/f", 5)
    assert fio.exists(f"{base}/f") and not fio.exists(f"{base}/g")
    with pytest.raises(ObjectNotFoundError, match="/g"):
        fio.stat(f"{base}/g")
    with pytest.raises(ObjectNotFoundError):
        fio.open_input(f"{base}/g")


def test_open_input_is_seekable_and_reads_fully(store):
    fio, base = store
    data = random.Random(7).randbytes(300_000)
    fio.write(f"{base}/blob", data)
    with fio.open_input(f"{base}/blob") as stream:
        assert stream.read(10) == data[:10]
        assert stream.tell() == 10
        stream.seek(200_000)
        assert stream.read(5) == data[200_000:200_005]
        stream.seek(-7, io.SEEK_END)
        assert stream.read() == data[-7:]
        assert stream.read(1) == b""
        stream.seek(0)
        assert stream.read() == data


def test_write_replaces_atomically_and_changes_etag(store):
    fio, base = store
    first = fio.write(f"{base}/obj", b"one")
    second = fio.write(f"{base}/obj", b"two")
    assert first.etag != second.etag
    assert fio.read_bytes(f"{base}/obj") == b"two"


def test_write_if_absent_refuses_to_replace(store):
    fio, base = store
    fio.write(f"{base}/once", b"first", if_absent=True)
    with pytest.raises(ObjectExistsError, match="once"):
        fio.write(f"{base}/once", b"second", if_absent=True)
    assert fio.read_bytes(f"{base}/once") == b"first"


def test_write_from_stream(store):
    fio, base = store
    payload = random.Random(1).randbytes(100_000)
    info = fio.write(f"{base}/streamed", io.BytesIO(payload))
    assert info.size == len(payload)
    assert fio.read_bytes(f"{base}/streamed") == payload


def test_reader_pinned_to_listed_version_detects_replacement(store):
    fio, base = store
    fio.write(f"{base}/m", b"x" * 1000)
    listed = fio.stat(f"{base}/m")
    fio.write(f"{base}/m", b"y" * 1000)
    with pytest.raises(ObjectChangedError, match="changed"):
        with fio.open_input(f"{base}/m", info=listed) as stream:
            stream.read()


def test_delete_many_reports_every_uri(store):
    fio, base = store
    _put_tree(fio, base, [f"d/{i}" for i in range(5)])
    uris = [f"{base}/d/{i}" for i in range(5)]
    report = fio.delete_many(iter(uris))
    assert report.ok
    assert sorted(report.deleted + report.missing) == sorted(uris)
    assert list(fio.list(f"{base}/d")) == []


def test_copy(store):
    fio, base = store
    fio.write(f"{base}/src", b"payload")
    info = fio.copy(f"{base}/src", f"{base}/dst/copied")
    assert info.size == 7 and fio.read_bytes(f"{base}/dst/copied") == b"payload"


def test_unsupported_scheme():
    with pytest.raises(UnsupportedSchemeError, match="hdfs://nn/x"):
        RoutingFileIO().stat("hdfs://nn/x")


# -- local specifics --------------------------------------------------------------------------------

def test_local_check_directory_fails_closed_on_missing_root(tmp_path):
    fio = LocalFileIO()
    fio.check_directory(f"file://{tmp_path}")
    with pytest.raises(RootNotFoundError, match="refusing to treat it as empty"):
        fio.check_directory(f"file://{tmp_path}/not-mounted")


def test_local_delete_reports_missing_separately(tmp_path):
    fio = LocalFileIO()
    fio.write(f"file://{tmp_path}/a", b"1")
    report = fio.delete_many([f"file://{tmp_path}/a", f"file://{tmp_path}/b"])
    assert report.deleted == [f"file://{tmp_path}/a"] and report.missing == [f"file://{tmp_path}/b"]


def test_local_etag_changes_on_same_size_replacement(tmp_path):
    fio = LocalFileIO()
    a = fio.write(f"file://{tmp_path}/a", b"same")
    b = fio.write(f"file://{tmp_path}/a", b"SAME")
    assert a.size == b.size and a.etag != b.etag


def test_local_does_not_follow_directory_symlinks(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"1")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "real")
    # Listed as an object of its own (never descended): nothing below a root vanishes silently.
    listing = list(LocalFileIO().list(f"file://{tmp_path}/root"))
    assert [(i.uri, i.object_type.value) for i in listing] == [(f"file://{tmp_path}/root/link", "symlink")]


# -- S3 specifics -------------------------------------------------------------------------------------

@pytest.mark.s3
def test_s3_listing_pages_through_many_objects(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config.with_overrides(list_page_size=7))
    base = f"s3://{s3_bucket}/p"
    _put_tree(fio, base, [f"o{i:03d}" for i in range(30)])
    assert len(list(fio.list(base))) == 30


@pytest.mark.s3
def test_s3_ranged_reads_use_read_ahead_window(s3_config, s3_bucket):
    fio = S3FileIO(s3_config.with_overrides(read_ahead_bytes=64 * 1024))
    data = random.Random(3).randbytes(1_000_000)
    fio.write(f"s3://{s3_bucket}/big", data)
    stream = fio.open_input(f"s3://{s3_bucket}/big")
    rng = random.Random(5)
    chunks = [stream.read(rng.randint(1, 200)) for _ in range(500)]  # sequential small reads
    consumed = sum(map(len, chunks))
    assert b"".join(chunks) == data[:consumed]
    assert stream.requests == -(-consumed // (64 * 1024))  # one GET per window, not per read
    for _ in range(50):  # random seeks keep returning the right bytes
        pos, n = rng.randrange(len(data)), rng.randint(0, 100_000)
        stream.seek(pos)
        assert stream.read(n) == data[pos:pos + n]


@pytest.mark.s3
def test_s3_delete_batches_and_reports_failures(s3_config, s3_bucket):
    fio = S3FileIO(s3_config.with_overrides(delete_batch_size=4))
    uris = [f"s3://{s3_bucket}/x/{i}" for i in range(10)]
    for u in uris:
        fio.write(u, b"1")
    missing_bucket = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/k"
    report = fio.delete_many(uris + [missing_bucket])
    assert sorted(report.deleted) == sorted(uris)
    assert [f.uri for f in report.failed] == [missing_bucket]
    assert report.failed[0].code == "NoSuchBucket"
    assert list(fio.list(f"s3://{s3_bucket}/x")) == []


@pytest.mark.s3
def test_s3_missing_bucket_is_a_missing_root(s3_config):
    fio = S3FileIO(s3_config)
    with pytest.raises(RootNotFoundError, match="does not exist"):
        fio.check_directory(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/root")




@pytest.mark.s3
def test_s3_stat_and_list_pages_outlast_the_clients_own_retries(s3_config, s3_bucket, slow_s3):
    # botocore gives a request up after its attempts, or sooner once a long SlowDown storm drained the client's retry
    # quota; stat and every list page of a scan then wait and try again (the GC's re-list failed closed on one 503).
    base = f"s3://{s3_bucket}/storm"
    _put_tree(S3FileIO(s3_config), base, [f"o{i:03d}" for i in range(12)])
    fio = S3FileIO(slow_s3.config.with_overrides(max_attempts=2, list_page_size=5))
    slow_s3.set_faults(first=3, kinds={"head"})      # both of the client's attempts and the first of the next round
    assert fio.stat(f"{base}/o000").size == 4
    slow_s3.set_faults(first=3, kinds={"list"})
    assert len(list(fio.list(base))) == 12
    assert slow_s3.injected == 6
    slow_s3.set_faults(first=3, kinds={"head"})
    with pytest.raises(ObjectNotFoundError):         # an answer that means something is not retried
        fio.stat(f"{base}/absent")
    slow_s3.set_faults(first=1, kinds={"head"})      # the bulk engine's client (one attempt): it retries and counts
    with pytest.raises(StorageError, match="503"):
        S3FileIO(slow_s3.config.with_overrides(max_attempts=1)).stat(f"{base}/o001")


@pytest.mark.s3
def test_s3_multipart_write_for_large_streams(s3_config, s3_bucket, monkeypatch):
    import statekeeper.storage.s3 as s3mod

    monkeypatch.setattr(s3mod, "_SINGLE_PUT_MAX", 5 * 1024 * 1024)
    monkeypatch.setattr(s3mod, "_PART_SIZE", 5 * 1024 * 1024)
    payload = random.Random(11).randbytes(11 * 1024 * 1024 + 17)
    fio = S3FileIO(s3_config)
    info = fio.write(f"s3://{s3_bucket}/mp", io.BytesIO(payload))
    assert info.size == len(payload)
    assert fio.read_bytes(f"s3://{s3_bucket}/mp") == payload


@pytest.mark.s3
def test_s3_fileio_pickles_without_its_client(s3_config, s3_bucket):
    import pickle

    fio = RoutingFileIO(s3_config)
    fio.write(f"s3://{s3_bucket}/k", b"v")
    clone = pickle.loads(pickle.dumps(fio))
    assert clone.read_bytes(f"s3://{s3_bucket}/k") == b"v"


@pytest.mark.s3
def test_cross_backend_copy(s3_config, s3_bucket, tmp_path):
    fio = RoutingFileIO(s3_config)
    fio.write(f"file://{tmp_path}/local", b"abc")
    fio.copy(f"file://{tmp_path}/local", f"s3://{s3_bucket}/remote")
    fio.copy(f"s3://{s3_bucket}/remote", f"file://{tmp_path}/back")
    assert (tmp_path / "back").read_bytes() == b"abc"


# -- roots --------------------------------------------------------------------------------------------

def test_roots_validate_and_locate(tmp_path):
    roots = Roots([f"{tmp_path}/cp", f"file://{tmp_path}/sp/", "s3a://bucket/checkpoints"])
    assert roots.uris == [f"file://{tmp_path}/cp", f"file://{tmp_path}/sp", "s3://bucket/checkpoints"]
    assert roots.require(f"file://{tmp_path}/cp/j/chk-1/_metadata").uri == f"file://{tmp_path}/cp"
    assert roots.root_of("s3://bucket/checkpoints-old/x") is None
    assert roots.require("s3://bucket/checkpoints/x").relative("s3://bucket/checkpoints/x/y") == "x/y"
    with pytest.raises(OutsideRootError, match="outside the configured roots"):
        roots.require(f"file://{tmp_path}/elsewhere")
    assert root_id_of("s3://bucket/checkpoints") == root_id_of("s3n://bucket//checkpoints/")


@pytest.mark.parametrize("uris, message", [
    (["/data/cp", "/data/cp/job"], "overlap"),
    (["/data/cp", "file:///data/cp/"], "configured twice"),
    (["relative/dir"], "invalid root"),
    (["hdfs://nn/cp"], "listing an HDFS root needs an HDFS client"),
    (["ftp://host/cp"], "supported roots are file://"),
    (["/"], "top level"),
    (["s3://bucket"], "top level"),
    ([], "at least one root"),
])
def test_invalid_roots(uris, message):
    with pytest.raises(RootConfigError, match=message):
        Roots(uris)


def test_guarded_fileio_refuses_everything_outside_roots(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_bytes(b"precious")
    guarded = GuardedFileIO(RoutingFileIO(), Roots([f"{tmp_path}/root"]))
    outside = f"file://{tmp_path}/other/f"
    for call in (lambda: guarded.stat(outside), lambda: guarded.open_input(outside),
                 lambda: list(guarded.list(f"file://{tmp_path}/other")),
                 lambda: guarded.write(outside, b"x"), lambda: guarded.copy(outside, f"file://{tmp_path}/root/c")):
        with pytest.raises(OutsideRootError):
            call()
    guarded.write(f"file://{tmp_path}/root/inside", b"1")
    report: DeleteReport = guarded.delete_many([outside, f"file://{tmp_path}/root/inside"])
    assert report.deleted == [f"file://{tmp_path}/root/inside"]
    assert [(f.uri, f.code) for f in report.failed] == [(outside, "OutsideRoot")]
    assert (tmp_path / "other" / "f").read_bytes() == b"precious"
