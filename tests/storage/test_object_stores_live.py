"""GcsFileIO and AzureFileIO against their emulators (gcp-storage-emulator, Azurite), beyond the FileIO
contract that tests/storage/test_storage_fileio.py runs on every backend: version ids in listings, paging,
ranged reads, batch deletes, pinned server-side copies, error mapping, the other Azure spellings, and a
real Flink store relocated onto each store and parsed back through the FileIO.
"""
from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from statekeeper.format import extract_references, read_metadata
from statekeeper.storage import (
    EmptyRootError,
    NotRegularFileError,
    ObjectChangedError,
    ObjectNotFoundError,
    RootNotFoundError,
    RoutingFileIO,
    StorageConfigError,
)
from statekeeper.storage.azure import AzureFileIO, AzureLocation
from statekeeper.storage.gcs import GcsFileIO
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store
from tests.plugins.object_stores import AZURITE_ACCOUNT, azure_uri


@pytest.fixture(params=[pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)])
def remote(request):
    """(FileIO, base URI of an empty prefix, kind) on each emulator."""
    if request.param == "gcs":
        config = request.getfixturevalue("gcs_config")
        return GcsFileIO(config), f"gs://{request.getfixturevalue('gcs_bucket')}/base", "gcs"
    config = request.getfixturevalue("azure_config")
    return AzureFileIO(config), azure_uri(request.getfixturevalue("azure_container"), "base"), "azure"


def test_listing_carries_size_mtime_and_version_id(remote):
    fio, base, kind = remote
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    written = fio.write(f"{base}/chk-1/_metadata", b"m" * 10)
    listed = {i.uri: i for i in fio.list(base)}
    info = listed[f"{base}/chk-1/_metadata"]
    assert info.size == 10 and before <= info.mtime <= datetime.now(timezone.utc) + timedelta(seconds=5)
    assert info.etag and info.etag == written.etag == fio.stat(info.uri).etag
    if kind == "gcs":
        assert info.etag.isdigit()          # the object's generation
    else:
        assert not info.etag.startswith('"')  # the ETag without its quotes, as listed and as stat'ed
    fio.write(info.uri, b"n" * 10)
    assert fio.stat(info.uri).etag != info.etag


def test_listing_pages_and_non_recursive_listing(remote):
    fio, base, kind = remote
    config = fio.config.with_overrides(list_page_size=3)
    paged = type(fio)(config)
    names = [f"shared/f{i:02d}" for i in range(8)] + ["chk-1/_metadata", "top"]
    for name in names:
        fio.write(f"{base}/{name}", name.encode())
    assert sorted(i.uri for i in paged.list(base)) == sorted(f"{base}/{n}" for n in names)
    assert [i.uri for i in paged.list(base, recursive=False)] == [f"{base}/top"]
    assert list(paged.list_dirs(base)) == [f"{base}/chk-1", f"{base}/shared"]


def test_ranged_reads_use_one_request_per_window(remote):
    fio, base, _ = remote
    payload = bytes(range(256)) * 4096                    # 1 MiB
    fio.write(f"{base}/big", payload)
    small = type(fio)(fio.config.with_overrides(read_ahead_bytes=256 * 1024))
    with small.open_input(f"{base}/big") as stream:
        assert stream.read(10) == payload[:10]
        assert stream.read(1000) == payload[10:1010]
        assert stream.requests == 1                       # both served from one 256 KiB window
        stream.seek(700_000)
        assert stream.read(5) == payload[700_000:700_005]
        assert stream.requests == 2
        stream.seek(-3, 2)
        assert stream.read() == payload[-3:]


def test_reader_fails_when_the_object_is_replaced_mid_read(remote):
    fio, base, _ = remote
    fio.write(f"{base}/m", b"a" * 300_000)
    small = type(fio)(fio.config.with_overrides(read_ahead_bytes=64 * 1024))
    with small.open_input(f"{base}/m") as stream:
        assert stream.read(10) == b"a" * 10
        fio.write(f"{base}/m", b"b" * 300_000)
        stream.seek(200_000)
        with pytest.raises(ObjectChangedError, match="changed while being read"):
            stream.read(10)


def test_batch_delete_spans_several_batches_and_reports_missing(remote):
    fio, base, _ = remote
    batched = type(fio)(fio.config.with_overrides(delete_batch_size=4))
    uris = [f"{base}/d/{i}" for i in range(10)]
    for uri in uris:
        fio.write(uri, b"x")
    report = batched.delete_many([*uris, f"{base}/d/never"])
    assert sorted(report.deleted) == sorted(uris) and report.missing == [f"{base}/d/never"] and report.ok
    assert list(fio.list(f"{base}/d")) == []


def test_delete_if_unchanged_deletes_only_the_named_version(remote):
    fio, base, kind = remote
    keep = fio.write(f"{base}/d/rewritten", b"v1")
    fio.write(keep.uri, b"v2")                      # same size, another generation / ETag
    gone = fio.write(f"{base}/d/gone", b"x")
    fio.delete_many([gone.uri])
    doomed = [fio.write(f"{base}/d/f{i}", b"x") for i in range(3)]
    answers = fio.delete_if_unchanged([(i.uri, i.etag) for i in doomed] + [(keep.uri, keep.etag),
                                                                          (gone.uri, gone.etag)])
    assert [a.uri for a in answers] == [i.uri for i in doomed] + [keep.uri, gone.uri]
    assert [a.outcome.value for a in answers] == ["deleted"] * 3 + ["changed", {"gcs": "missing",
                                                                                  "azure": "changed"}[kind]]
    # (Azurite answers 412 for If-Match on a missing blob; callers read the object once more to tell.)
    assert answers[3].status == 412 and not any(a.retriable for a in answers)
    assert [i.uri for i in fio.list(f"{base}/d")] == [keep.uri] and fio.read_bytes(keep.uri) == b"v2"
    with pytest.raises(ValueError, match="generation" if kind == "gcs" else "ETag"):
        fio.delete_if_unchanged([(keep.uri, "")])
    with pytest.raises(ValueError, match="at most"):
        fio.delete_if_unchanged([(keep.uri, "1")] * (fio.CONDITIONAL_DELETE_MAX + 1))


def test_server_side_copy_is_pinned_to_the_stated_version(remote, monkeypatch):
    fio, base, _ = remote
    fio.write(f"{base}/src", b"v1")
    copied = fio.copy(f"{base}/src", f"{base}/dst/copy")
    assert copied.size == 2 and fio.read_bytes(f"{base}/dst/copy") == b"v1"
    old = fio.stat(f"{base}/src")
    fio.write(f"{base}/src", b"v2")
    monkeypatch.setattr(fio, "stat", lambda uri: old)     # as if stat'ed just before the replacement
    with pytest.raises(ObjectChangedError, match="changed since it was stat'ed"):
        fio.copy(f"{base}/src", f"{base}/dst/copy2")


def test_not_found_and_missing_roots_map_to_storage_errors(remote):
    fio, base, kind = remote
    with pytest.raises(ObjectNotFoundError, match="does not exist"):
        fio.stat(f"{base}/absent")
    with pytest.raises(ObjectNotFoundError):
        fio.open_input(f"{base}/absent")
    assert not fio.exists(f"{base}/absent")
    with pytest.raises(ObjectNotFoundError):
        fio.copy(f"{base}/absent", f"{base}/x")
    with pytest.raises(EmptyRootError, match="does not exist or is empty"):
        fio.check_directory(f"{base}/nothing-here")
    fio.write(f"{base}/cp/x", b"1")
    fio.check_directory(f"{base}/cp")
    missing = "gs://sk-no-such-bucket/cp" if kind == "gcs" else azure_uri("sk-no-such-container", "cp")
    with pytest.raises(RootNotFoundError, match="does not exist"):
        fio.check_directory(missing)
    with pytest.raises(RootNotFoundError, match="does not exist"):
        list(fio.list(missing))


def test_fileio_pickles_without_its_client(remote):
    fio, base, _ = remote
    fio.write(f"{base}/p", b"pickled")
    clone = pickle.loads(pickle.dumps(fio))
    assert clone.read_bytes(f"{base}/p") == b"pickled"


# -- Azure specifics --------------------------------------------------------------------------------

@pytest.mark.azure
def test_azure_spellings_reach_one_blob_and_listings_come_back_canonical(azure_config, azure_container):
    fio = RoutingFileIO(azure_config)
    wasbs = f"wasbs://{azure_container}@{AZURITE_ACCOUNT}.blob.core.windows.net/cp/chk-1/_metadata"
    fio.write(wasbs, b"written as wasbs")
    for spelling in (f"abfs://{azure_container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/cp/chk-1/_metadata",
                     f"wasb://{azure_container}@{AZURITE_ACCOUNT.upper()}.blob.core.windows.net/cp/chk-1/_metadata"):
        assert fio.read_bytes(spelling) == b"written as wasbs"
    listed = [i.uri for i in fio.list(f"wasbs://{azure_container}@{AZURITE_ACCOUNT}.blob.core.windows.net/cp")]
    assert listed == [normalize_uri(wasbs)] == [azure_uri(azure_container, "cp/chk-1/_metadata")]


@pytest.mark.azure
def test_azure_hierarchical_namespace_directory_entries_are_not_files(azure_config, azure_container):
    """On a Data Lake Gen2 account a blob listing shows each directory as a zero-byte blob with metadata
    hdi_isfolder=true; Azurite has no HNS, so the entry is made by hand."""
    fio = AzureFileIO(azure_config)
    base = azure_uri(azure_container, "cp")
    fio.write(f"{base}/job/shared/f1", b"state")
    loc = AzureLocation(f"{base}/job/shared")
    fio.service(loc).get_blob_client(loc.container, loc.path).upload_blob(b"", metadata={"hdi_isfolder": "true"})
    assert [i.uri for i in fio.list(base)] == [f"{base}/job/shared/f1"]
    with pytest.raises(NotRegularFileError, match="directory"):
        fio.stat(f"{base}/job/shared")


@pytest.mark.azure
def test_azure_conditional_deletes_without_blob_batch_go_one_by_one_still_conditional(azure_config, azure_container,
                                                                                     monkeypatch, caplog):
    """An account that refuses Blob Batch (it has not always been offered with a hierarchical namespace) gets
    single Delete Blob requests with the same If-Match, never an unconditional batch."""
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import ContainerClient

    calls = []

    def refuse(self, *blobs, **kwargs):
        calls.append(len(blobs))
        error = HttpResponseError(message="Blob Batch is not supported on this account")
        error.status_code = 400
        raise error

    monkeypatch.setattr(ContainerClient, "delete_blobs", refuse)
    fio = AzureFileIO(azure_config)
    base = azure_uri(azure_container, "cp")
    doomed = [fio.write(f"{base}/f{i}", b"x") for i in range(3)]
    keep = fio.write(f"{base}/keep", b"v1")
    fio.write(keep.uri, b"v2")
    answers = fio.delete_if_unchanged([(i.uri, i.etag) for i in doomed] + [(keep.uri, keep.etag)])
    assert [a.outcome.value for a in answers] == ["deleted"] * 3 + ["changed"]
    assert [i.uri for i in fio.list(base)] == [keep.uri] and fio.read_bytes(keep.uri) == b"v2"
    again = fio.write(f"{base}/again", b"x")
    assert fio.delete_if_unchanged([(again.uri, again.etag)])[0].outcome.value == "deleted"
    assert calls == [4]   # the refusal is remembered for the account: no second batch attempt
    assert "refused a Blob Batch request" in caplog.text


@pytest.mark.azure
def test_azure_refuses_a_uri_of_another_account(azure_config):
    fio = AzureFileIO(azure_config)
    with pytest.raises(StorageConfigError, match="credentials are for 'devstoreaccount1'"):
        fio.stat("abfss://c@otheraccount.dfs.core.windows.net/x")
    with pytest.raises(StorageConfigError, match="no Azure credentials"):
        AzureFileIO(azure_config.with_overrides(azure_account_key=None)).stat(azure_uri("c", "x"))


# -- a real Flink store on each store ------------------------------------------------------------------

@pytest.mark.flink
@pytest.mark.parametrize("kind", [pytest.param("gcs", marks=pytest.mark.gcs),
                                  pytest.param("azure", marks=pytest.mark.azure)])
def test_relocated_flink_store_lists_completely_and_parses_through_the_fileio(request, flink_fixture, kind):
    """chain_claim (Flink 2.3.0: job B restored from A's checkpoint in CLAIM mode, so B's `_metadata`
    reference A's shared files) copied onto the store with every `_metadata` rewritten by the codec. On
    Azure the `_metadata` name the copy as wasbs://...blob... while listings say abfss://...dfs...: every
    reference must still join a listed object."""
    fx = flink_fixture("2.3.0", "chain_claim")
    if kind == "gcs":
        fileio = RoutingFileIO(request.getfixturevalue("gcs_config"))
        target = f"gs://{request.getfixturevalue('gcs_bucket')}/flink store"
        spelling = None
    else:
        fileio = RoutingFileIO(request.getfixturevalue("azure_config"))
        container = request.getfixturevalue("azure_container")
        target = azure_uri(container, "flink store")
        spelling = f"wasbs://{container}@{AZURITE_ACCOUNT}.blob.core.windows.net/flink store"
    root = relocate_store(fx.root, target, fileio, metadata_spelling=spelling)

    local = sorted(p.relative_to(fx.root).as_posix() for p in Path(fx.root).rglob("*")
                   if p.is_file() and not p.is_symlink())
    listing = {i.uri: i for i in fileio.list(root)}
    assert sorted(u[len(root) + 1:] for u in listing) == local

    metadata = [i for u, i in listing.items() if u.endswith("/_metadata")]
    assert len(metadata) >= 3
    referenced = 0
    for info in metadata:
        with fileio.open_input(info.uri, info=info) as stream:
            model = read_metadata(stream, info.uri)
        refs = extract_references(model, info.uri)
        for uri, stated in refs.physical_files().items():
            assert uri.startswith(root + "/"), uri
            assert uri in listing, f"{info.uri} references {uri}, which the listing does not have"
            assert listing[uri].size >= stated
            referenced += 1
    assert referenced > 0
    if spelling:
        raw = fileio.read_bytes(metadata[0].uri)
        assert spelling.encode() in raw and root.encode() not in raw
