"""Transfer and verify_objects against local temp directories, the session's S3 server, SeaweedFS (also
standing in for OSS), gcp-storage-emulator and Azurite.

Server-side copies are recognised by `method`: the same StorageConfig is one store and identity; the
same server under another endpoint spelling (localhost for 127.0.0.1) is, as far as the copier
can tell, another store, so it must stream.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import pickle
import random
import threading
import time

import pytest

from statekeeper.storage import RootConfigError, RoutingFileIO, StorageConfig
from statekeeper.storage.s3 import make_s3_client
from statekeeper.storage.transfer import (
    Transfer,
    TransferItem,
    TransferOutcome,
    TransferSettings,
    VerifyItem,
    verify_objects,
)
from statekeeper.storage.transfer import _ExactStream, _SizeMismatch, _SourceReader  # the size guards, tested directly

from tests.plugins.object_stores import azure_uri
from tests.plugins.s3 import make_bucket

MiB = 1024 * 1024
LOCAL = StorageConfig()


def _payload(n: int, seed: int = 0) -> bytes:
    # Seeded, so a failure reproduces; random, so no two parts or files look alike.
    return random.Random(seed).randbytes(n)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _other_endpoint(config: StorageConfig) -> StorageConfig:
    return dataclasses.replace(config, endpoint=config.endpoint.replace("127.0.0.1", "localhost"))


@pytest.fixture
def dirs(tmp_path):
    """(source root, target root) as canonical file:// URIs, both existing."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    return f"file://{src}", f"file://{dst}"


def _put(fio: RoutingFileIO, uri: str, data: bytes) -> None:
    fio.write(uri, data)


def _local_transfer(dirs, **settings) -> Transfer:
    src, dst = dirs
    return Transfer(LOCAL, None, [dst], TransferSettings(**settings), source_roots=[src])


def _one(transfer: Transfer, source: str, target: str, expected_size: int | None = None):
    results = list(transfer.run([TransferItem(source, target, expected_size)]))
    assert len(results) == 1
    return results[0]


# -- what happens to an object between the copier's steps (each replaces one Transfer step for a test) ----------

def _target_unseen_at_first_stat(monkeypatch) -> list[str]:
    """The copier's first stat of a target finds nothing (it predates another writer's object); later ones look.
    Returns the targets stat'ed, in order, as the copier goes on."""
    original = Transfer._stat_target
    calls: list[str] = []

    def stale_first(self, target):
        calls.append(target)
        return None if len(calls) == 1 else original(self, target)

    monkeypatch.setattr(Transfer, "_stat_target", stale_first)
    return calls


def _source_rewritten_after_stat(monkeypatch, fio: RoutingFileIO, new: bytes) -> None:
    """Each source the copier stats gets `new` written over it just after its first stat (same key)."""
    original = Transfer._stat_source
    rewritten: set[str] = set()

    def then_rewritten(self, source):
        info = original(self, source)
        if source not in rewritten:
            _put(fio, source, new)
            rewritten.add(source)
        return info

    monkeypatch.setattr(Transfer, "_stat_source", then_rewritten)


def _source_rewritten_after_open(monkeypatch, fio: RoutingFileIO, new: bytes) -> None:
    """Each source the copier opens gets `new` written over it just after the open (its reads are pinned to the
    version stat'ed before)."""
    original = Transfer._open_source

    def rewritten_after_open(self, source, hashed):
        opened = original(self, source, hashed)
        _put(fio, source.uri, new)
        return opened

    monkeypatch.setattr(Transfer, "_open_source", rewritten_after_open)


# -- the copy paths -------------------------------------------------------------------------------------

def test_local_to_local(dirs):
    src, dst = dirs
    fio = RoutingFileIO()
    data = _payload(300_000, 1)
    _put(fio, f"{src}/job/chk-1/a", data)
    result = _one(_local_transfer(dirs), f"{src}/job/chk-1/a", f"{dst}/job/chk-1/a", len(data))
    assert (result.outcome, result.method, result.size, result.checksum, result.message, result.retries) == (
        TransferOutcome.COPIED, "local", len(data), None, None, 0)
    assert fio.read_bytes(f"{dst}/job/chk-1/a") == data
    # Nothing but the target in the target directory: the temp file was renamed, not left behind.
    assert os.listdir(f"{dst[7:]}/job/chk-1") == ["a"]


def test_local_to_local_empty_file(dirs):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/empty", b"")
    result = _one(_local_transfer(dirs, checksum=True), f"{src}/empty", f"{dst}/empty")
    assert (result.outcome, result.size, result.checksum) == (TransferOutcome.COPIED, 0, _sha(b""))
    assert os.path.getsize(f"{dst[7:]}/empty") == 0


def test_local_to_s3(dirs, s3_config, s3_bucket):
    src, _ = dirs
    data = _payload(200_000, 2)
    _put(RoutingFileIO(), f"{src}/f", data)
    transfer = Transfer(LOCAL, s3_config, [f"s3://{s3_bucket}/dr"], source_roots=[src])
    result = _one(transfer, f"{src}/f", f"s3://{s3_bucket}/dr/f", len(data))
    assert (result.outcome, result.method, result.size) == (TransferOutcome.COPIED, "stream", len(data))
    assert RoutingFileIO(s3_config).read_bytes(f"s3://{s3_bucket}/dr/f") == data


def test_s3_to_local(dirs, s3_config, s3_bucket):
    _, dst = dirs
    data = _payload(150_000, 3)
    _put(RoutingFileIO(s3_config), f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, LOCAL, [dst], TransferSettings(checksum=True),
                        source_roots=[f"s3://{s3_bucket}/cp"])
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"{dst}/cp/f", len(data))
    assert (result.outcome, result.method, result.checksum) == (TransferOutcome.COPIED, "stream", _sha(data))
    assert RoutingFileIO().read_bytes(f"{dst}/cp/f") == data


def test_s3_to_s3_same_store_copies_server_side(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config)
    data = _payload(100_000, 4)
    _put(fio, f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"], source_roots=[f"s3://{s3_bucket}/cp"])
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f", len(data))
    assert (result.outcome, result.method, result.size) == (TransferOutcome.COPIED, "server_side", len(data))
    assert fio.read_bytes(f"s3://{s3_bucket}/dr/f") == data


def _heads_of(transfer: Transfer, uri: str) -> list[str]:
    """Keys of every HeadObject the transfer's S3 client sends from now on (source and target share it)."""
    keys: list[str] = []
    client = transfer._fileios()[1].backend(uri).client
    client.meta.events.register("before-parameter-build.s3.HeadObject", lambda params, **_: keys.append(params["Key"]))
    return keys


def test_server_side_copy_with_the_source_etag_needs_no_size_check(s3_config, s3_bucket):
    # On SeaweedFS, which enforces CopySourceIfMatch itself (the self-test proves it: no re-check adds requests).
    # CopyObject answers with the new object's ETag: equal to the stat'ed source's plain MD5, the copy is
    # that version byte for byte, so no HEAD of the target follows the copy (only the skip check before it).
    data = _payload(50_000, 14)
    _put(RoutingFileIO(s3_config), f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"], source_roots=[f"s3://{s3_bucket}/cp"])
    heads = _heads_of(transfer, f"s3://{s3_bucket}/dr/f")
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f", len(data))
    assert (result.outcome, result.method, result.size) == (TransferOutcome.COPIED, "server_side", len(data))
    assert sorted(heads) == ["cp/f", "dr/f"]


def test_server_side_copy_with_another_etag_still_checks_the_size(s3_config, s3_bucket):
    # On SeaweedFS, which enforces CopySourceIfMatch itself (the self-test proves it: no re-check adds requests).
    # A copy whose ETag does not prove identity (SSE-KMS, a store that ignored CopySourceIfMatch) is
    # stat'ed after the copy, and a size other than the stat'ed source's fails the item.
    data = _payload(50_000, 15)
    _put(RoutingFileIO(s3_config), f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"], source_roots=[f"s3://{s3_bucket}/cp"])
    heads = _heads_of(transfer, f"s3://{s3_bucket}/dr/f")
    client = transfer._fileios()[1].backend(f"s3://{s3_bucket}/dr/f").client
    copied = []

    def other_etag(parsed, **_):
        parsed["CopyObjectResult"]["ETag"] = '"00000000000000000000000000000000"'
        copied.append(True)

    def short_target(parsed, model, **_):
        if copied and "ContentLength" in parsed:
            parsed["ContentLength"] = len(data) - 1

    client.meta.events.register("after-call.s3.CopyObject", other_etag)
    client.meta.events.register("after-call.s3.HeadObject", short_target)
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f", len(data))
    assert result.outcome is TransferOutcome.FAILED
    assert f"left {len(data) - 1} bytes" in result.message
    assert sorted(heads) == ["cp/f", "dr/f", "dr/f"]


def test_s3_to_s3_other_endpoint_streams(s3_config, s3_bucket):
    other = _other_endpoint(s3_config)
    target_bucket = make_bucket(other)
    data = _payload(100_000, 5)
    _put(RoutingFileIO(s3_config), f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, other, [f"s3://{target_bucket}/dr"], TransferSettings(checksum=True),
                        source_roots=[f"s3://{s3_bucket}/cp"])
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"s3://{target_bucket}/dr/f", len(data))
    assert (result.outcome, result.method, result.checksum) == (TransferOutcome.COPIED, "stream", _sha(data))
    assert RoutingFileIO(other).read_bytes(f"s3://{target_bucket}/dr/f") == data


def test_stream_to_s3_uses_multipart_above_part_size(dirs, s3_config, s3_bucket):
    src, _ = dirs
    data = _payload(12 * MiB + 12345, 6)
    _put(RoutingFileIO(), f"{src}/big", data)
    transfer = Transfer(LOCAL, s3_config, [f"s3://{s3_bucket}/dr"], TransferSettings(part_size=5 * MiB, checksum=True))
    result = _one(transfer, f"{src}/big", f"s3://{s3_bucket}/dr/big", len(data))
    assert (result.outcome, result.method, result.checksum) == (TransferOutcome.COPIED, "stream", _sha(data))
    info = RoutingFileIO(s3_config).stat(f"s3://{s3_bucket}/dr/big")
    assert info.etag.endswith("-3")   # three parts: 5 + 5 + 2 MiB
    assert RoutingFileIO(s3_config).read_bytes(f"s3://{s3_bucket}/dr/big") == data


def test_server_side_multipart_copy_above_server_side_max(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config)
    data = _payload(12 * MiB + 1, 7)
    _put(fio, f"s3://{s3_bucket}/cp/big", data)
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"],
                        TransferSettings(part_size=5 * MiB, server_side_max=5 * MiB))
    result = _one(transfer, f"s3://{s3_bucket}/cp/big", f"s3://{s3_bucket}/dr/big", len(data))
    assert (result.outcome, result.method, result.size) == (TransferOutcome.COPIED, "server_side", len(data))
    assert fio.stat(f"s3://{s3_bucket}/dr/big").etag.endswith("-3")   # UploadPartCopy, three parts
    assert fio.read_bytes(f"s3://{s3_bucket}/dr/big") == data
    client = make_s3_client(s3_config)
    assert not client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads")   # completed, none left open


# -- skips and re-copies --------------------------------------------------------------------------------

def test_second_run_skips_and_rewrites_nothing(dirs):
    """A second run skips what the first wrote when it is given the versions the first recorded (the job
    passes dr_files.target_version), and rewrites nothing; without a record a local target proves nothing."""
    src, dst = dirs
    fio = RoutingFileIO()
    items = [TransferItem(f"{src}/d/f{i}", f"{dst}/d/f{i}", 1000 + i) for i in range(5)]
    for i, item in enumerate(items):
        _put(fio, item.source, _payload(1000 + i, i))
    transfer = _local_transfer(dirs)
    assert {r.outcome for r in transfer.run(items)} == {TransferOutcome.COPIED}
    before = {item.target: os.stat(item.target[7:]) for item in items}
    known = [TransferItem(i.source, i.target, i.expected_size, fio.stat(i.target).etag) for i in items]
    second = list(transfer.run(known))
    assert {(r.outcome, r.method) for r in second} == {(TransferOutcome.SKIPPED, "")}
    for item in items:
        after = os.stat(item.target[7:])
        assert (after.st_ino, after.st_mtime_ns) == (before[item.target].st_ino, before[item.target].st_mtime_ns)
    assert {r.outcome for r in transfer.run(items[:1])} == {TransferOutcome.COPIED}


def test_second_server_side_run_skips_on_equal_etags(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config)
    _put(fio, f"s3://{s3_bucket}/cp/f", _payload(5000, 8))
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"])
    item = TransferItem(f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f")
    assert transfer.copy_one(item).outcome is TransferOutcome.COPIED
    before = fio.stat(item.target)
    assert transfer.copy_one(item).outcome is TransferOutcome.SKIPPED
    assert fio.stat(item.target) == before


def test_target_of_another_size_is_overwritten(dirs):
    src, dst = dirs
    fio = RoutingFileIO()
    data = _payload(4000, 9)
    _put(fio, f"{src}/f", data)
    _put(fio, f"{dst}/f", data[:100])   # an earlier, interrupted copy by another tool
    result = _one(_local_transfer(dirs), f"{src}/f", f"{dst}/f", len(data))
    assert result.outcome is TransferOutcome.COPIED
    assert fio.read_bytes(f"{dst}/f") == data


def test_a_same_size_foreign_target_is_copied_again_in_either_mode(dirs):
    """Issue 28: a local target of the right size but other bytes (a stale or foreign copy) used to be
    skipped by its size in size mode, and the copy reported verified did not restore. Nothing proves it
    is the source's bytes, so both modes copy it again; checksum mode then skips it by SHA-256."""
    src, dst = dirs
    fio = RoutingFileIO()
    data = _payload(64 * 1024, 10)
    corrupt = bytes([data[0] ^ 0xFF]) + data[1:]
    _put(fio, f"{src}/f", data)
    _put(fio, f"{dst}/f", corrupt)

    size_mode = _one(_local_transfer(dirs), f"{src}/f", f"{dst}/f")
    assert (size_mode.outcome, size_mode.method, size_mode.checksum) == (TransferOutcome.COPIED, "local", None)
    assert fio.read_bytes(f"{dst}/f") == data

    _put(fio, f"{dst}/f", corrupt)
    checksum_mode = _one(_local_transfer(dirs, checksum=True), f"{src}/f", f"{dst}/f")
    assert (checksum_mode.outcome, checksum_mode.method, checksum_mode.checksum) == (
        TransferOutcome.COPIED, "local", _sha(data))
    assert fio.read_bytes(f"{dst}/f") == data

    again = _one(_local_transfer(dirs, checksum=True), f"{src}/f", f"{dst}/f")
    assert (again.outcome, again.checksum) == (TransferOutcome.SKIPPED, _sha(data))


def test_same_store_etags_catch_a_same_size_corrupted_target_in_size_mode(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config)
    data = _payload(10_000, 11)
    _put(fio, f"s3://{s3_bucket}/cp/f", data)
    _put(fio, f"s3://{s3_bucket}/dr/f", data[::-1])   # same size, other bytes, plain MD5 ETag
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"])
    result = transfer.copy_one(TransferItem(f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f"))
    assert (result.outcome, result.method) == (TransferOutcome.COPIED, "server_side")
    assert fio.read_bytes(f"s3://{s3_bucket}/dr/f") == data


def test_checksum_mode_server_side_reports_the_real_sha256(s3_config, s3_bucket):
    fio = RoutingFileIO(s3_config)
    data = _payload(70_000, 12)
    _put(fio, f"s3://{s3_bucket}/cp/f", data)
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"], TransferSettings(checksum=True))
    item = TransferItem(f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/dr/f", len(data))
    first, second = transfer.copy_one(item), transfer.copy_one(item)
    assert (first.outcome, first.method, first.checksum) == (TransferOutcome.COPIED, "server_side", _sha(data))
    assert (second.outcome, second.checksum) == (TransferOutcome.SKIPPED, _sha(data))


# -- the source moved on --------------------------------------------------------------------------------

def test_missing_source_is_source_missing(dirs, s3_config, s3_bucket):
    src, dst = dirs
    local = _one(_local_transfer(dirs), f"{src}/gone", f"{dst}/gone", 10)
    assert (local.outcome, local.size, local.method, local.retries) == (TransferOutcome.SOURCE_MISSING, 0, "", 0)
    assert "does not exist" in local.message
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"])
    remote = _one(transfer, f"s3://{s3_bucket}/cp/gone", f"s3://{s3_bucket}/dr/gone")
    assert remote.outcome is TransferOutcome.SOURCE_MISSING
    assert not os.path.exists(f"{dst[7:]}/gone")


def test_size_other_than_indexed_is_source_changed_and_writes_nothing(dirs):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/f", b"x" * 120)
    result = _one(_local_transfer(dirs), f"{src}/f", f"{dst}/f", expected_size=100)
    assert (result.outcome, result.size) == (TransferOutcome.SOURCE_CHANGED, 120)
    assert "120" in result.message and "100" in result.message
    assert not os.path.exists(f"{dst[7:]}/f")


# -- where writes may go --------------------------------------------------------------------------------

def test_target_below_a_source_root_is_refused(dirs):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/f", b"data")
    result = _one(_local_transfer(dirs), f"{src}/f", f"{src}/copy/f")
    assert (result.outcome, result.retries) == (TransferOutcome.FAILED, 0)
    assert f"below the source root {src}" in result.message and f"{src}/copy/f" in result.message
    assert not os.path.exists(f"{src[7:]}/copy")


def test_s3_target_below_a_source_root_is_refused(s3_config, s3_bucket):
    _put(RoutingFileIO(s3_config), f"s3://{s3_bucket}/cp/f", b"data")
    transfer = Transfer(s3_config, None, [f"s3://{s3_bucket}/dr"], source_roots=[f"s3://{s3_bucket}/cp"])
    result = _one(transfer, f"s3://{s3_bucket}/cp/f", f"s3://{s3_bucket}/cp/f.copy")
    assert result.outcome is TransferOutcome.FAILED
    assert f"below the source root s3://{s3_bucket}/cp" in result.message
    assert not RoutingFileIO(s3_config).exists(f"s3://{s3_bucket}/cp/f.copy")


def test_target_symlinked_into_a_source_root_is_refused(dirs, tmp_path):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/f", b"data")
    os.symlink(src[7:], f"{dst[7:]}/sneaky")
    result = _one(_local_transfer(dirs), f"{src}/f", f"{dst}/sneaky/f")
    assert result.outcome is TransferOutcome.FAILED
    assert "source root" in result.message
    assert sorted(os.listdir(src[7:])) == ["f"]


@pytest.mark.parametrize("planned", [False, True], ids=["stat", "planned"])
def test_target_that_is_a_symlink_into_a_source_root_is_refused_and_never_written_through(dirs, planned):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/f", b"data")
    _put(RoutingFileIO(), f"{src}/g", b"keep")
    os.symlink(f"{src[7:]}/g", f"{dst[7:]}/f")
    info = RoutingFileIO().stat(f"{src}/f")
    item = TransferItem(f"{src}/f", f"{dst}/f", info.size, source_version=info.etag if planned else None)
    [result] = list(_local_transfer(dirs).run([item]))
    assert result.outcome is TransferOutcome.FAILED
    assert "symlink" in result.message, result.message
    assert open(f"{src[7:]}/g", "rb").read() == b"keep" and os.path.islink(f"{dst[7:]}/f")


def test_target_outside_the_target_roots_is_refused(dirs, tmp_path):
    src, dst = dirs
    _put(RoutingFileIO(), f"{src}/f", b"data")
    outside = f"file://{tmp_path}/elsewhere/f"
    result = _one(_local_transfer(dirs), f"{src}/f", outside)
    assert result.outcome is TransferOutcome.FAILED
    assert "outside the target roots" in result.message and dst in result.message
    assert not os.path.exists(f"{tmp_path}/elsewhere")


def test_target_root_overlapping_a_source_root_is_refused_up_front(dirs):
    src, _ = dirs
    with pytest.raises(RootConfigError, match="overlaps source root"):
        Transfer(LOCAL, None, [f"{src}/dr"], source_roots=[src])


# -- failures -------------------------------------------------------------------------------------------

def test_permanent_error_fails_without_retrying(dirs, s3_config):
    src, _ = dirs
    _put(RoutingFileIO(), f"{src}/f", b"data")
    transfer = Transfer(LOCAL, s3_config, ["s3://no-such-bucket-statekeeper/dr"],
                        TransferSettings(backoff_base=0.01))
    result = _one(transfer, f"{src}/f", "s3://no-such-bucket-statekeeper/dr/f")
    assert (result.outcome, result.retries, result.size) == (TransferOutcome.FAILED, 0, 4)
    assert "NoSuchBucket" in result.message


def test_transient_errors_are_retried_then_failed(dirs, slow_s3, s3_bucket):
    _, dst = dirs
    source_config = slow_s3.config.with_overrides(max_attempts=1)
    _put(RoutingFileIO(source_config), f"s3://{s3_bucket}/cp/f", b"payload")
    slow_s3.set_faults(share=1.0, kinds={"get"})   # every GET throttled: the bytes never come
    transfer = Transfer(source_config, LOCAL, [dst], TransferSettings(max_attempts=3, backoff_base=0.01))
    item = TransferItem(f"s3://{s3_bucket}/cp/f", f"{dst}/f", 7)
    failed = transfer.copy_one(item)
    assert (failed.outcome, failed.retries, failed.size) == (TransferOutcome.FAILED, 2, 7)
    assert "SlowDown" in failed.message and "3 attempts" in failed.message
    assert not os.path.exists(f"{dst[7:]}/f") and os.listdir(dst[7:]) == []   # no temp file left either
    slow_s3.set_faults()
    assert transfer.copy_one(item).outcome is TransferOutcome.COPIED


# -- verification ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3),
                                     pytest.param("gcs", marks=pytest.mark.gcs),
                                     pytest.param("azure", marks=pytest.mark.azure)])
def test_verify_objects(backend, request, tmp_path):
    if backend == "local":
        config, base = LOCAL, f"file://{tmp_path}/dr"
    elif backend == "s3":
        config = request.getfixturevalue("s3_config")
        base = f"s3://{request.getfixturevalue('s3_bucket')}/dr"
    elif backend == "gcs":
        config = request.getfixturevalue("gcs_config")
        base = f"gs://{request.getfixturevalue('gcs_bucket')}/dr"
    else:
        config = request.getfixturevalue("azure_config")
        base = azure_uri(request.getfixturevalue("azure_container"), "dr")
    fio = RoutingFileIO(config)
    good, short, corrupt = _payload(5000, 1), _payload(120, 2), _payload(300, 3)
    _put(fio, f"{base}/good", good)
    _put(fio, f"{base}/short", short[:100])
    _put(fio, f"{base}/corrupt", corrupt[::-1])
    items = [VerifyItem(f"{base}/good", len(good), _sha(good)), VerifyItem(f"{base}/short", 120, _sha(short)),
             VerifyItem(f"{base}/corrupt", len(corrupt), _sha(corrupt)), VerifyItem(f"{base}/missing", 10)]

    by_target = {r.target: r for r in verify_objects(items, config, checksum=True, in_flight=3)}
    assert (by_target[f"{base}/good"].ok, by_target[f"{base}/good"].size) == (True, 5000)
    assert by_target[f"{base}/short"].message == "size 100 at the target, expected 120"
    assert not by_target[f"{base}/corrupt"].ok and "checksum mismatch" in by_target[f"{base}/corrupt"].message
    assert (by_target[f"{base}/missing"].ok, by_target[f"{base}/missing"].size,
            by_target[f"{base}/missing"].message) == (False, None, "missing at the target")

    size_only = {r.target: r.ok for r in verify_objects(items, config, checksum=False)}
    assert size_only == {f"{base}/good": True, f"{base}/short": False, f"{base}/corrupt": True,
                         f"{base}/missing": False}


# -- many items, pickling -------------------------------------------------------------------------------

def test_run_is_bounded_and_copies_every_item(dirs):
    src, dst = dirs
    fio = RoutingFileIO()
    count, in_flight = 500, 8
    for i in range(count):
        _put(fio, f"{src}/j/f{i:03d}", _payload(100 + i, i))
    taken = 0
    lock = threading.Lock()

    def items():
        nonlocal taken
        for i in range(count):
            with lock:
                taken += 1
            yield TransferItem(f"{src}/j/f{i:03d}", f"{dst}/j/f{i:03d}", 100 + i)

    transfer = _local_transfer(dirs, in_flight=in_flight, durable=False)
    results = []
    for result in transfer.run(items()):
        results.append(result)
        assert taken - len(results) < 2 * in_flight   # the generator is consumed a window at a time
    assert len(results) == count
    assert {r.outcome for r in results} == {TransferOutcome.COPIED}
    for i in range(count):
        assert fio.read_bytes(f"{dst}/j/f{i:03d}") == _payload(100 + i, i)


def test_transfer_pickles_before_and_after_use(dirs, s3_config, s3_bucket):
    src, _ = dirs
    _put(RoutingFileIO(), f"{src}/f", b"pickled")
    transfer = Transfer(LOCAL, s3_config, [f"s3://{s3_bucket}/dr"], TransferSettings(in_flight=2),
                        source_roots=[src])
    clone = pickle.loads(pickle.dumps(transfer))
    assert clone.copy_one(TransferItem(f"{src}/f", f"s3://{s3_bucket}/dr/f")).outcome is TransferOutcome.COPIED
    assert transfer.copy_one(TransferItem(f"{src}/f", f"s3://{s3_bucket}/dr/f")).outcome is TransferOutcome.SKIPPED
    again = pickle.loads(pickle.dumps(transfer))   # with live clients inside: they are left behind
    assert (again.settings, again.target_roots.uris) == (transfer.settings, transfer.target_roots.uris)
    assert again.copy_one(TransferItem(f"{src}/f", f"s3://{s3_bucket}/dr/f")).outcome is TransferOutcome.SKIPPED


@pytest.mark.parametrize("actual, stat_size", [(b"x" * 10, 8), (b"x" * 6, 8)])
def test_source_read_other_than_its_stat_size_fails_the_copy(actual, stat_size):
    # A file that grows or shrinks while it is read (no store pins local versions mid-read): the
    # reader refuses to hand on a complete-looking copy, so nothing is written or renamed.
    reader = _SourceReader(io.BytesIO(actual), "file:///src/f", stat_size, hashlib.sha256())
    with pytest.raises(_SizeMismatch, match="changed while being copied"):
        reader.read_exact(stat_size)   # as the S3 upload reads: the stat'ed size, then a check for more
        reader.finish()


@pytest.mark.parametrize("actual, stat_size", [(b"x" * 10, 8), (b"x" * 6, 8), (b"x", 0)])
def test_uploads_to_gcs_and_azure_never_get_the_last_bytes_of_a_source_of_another_size(actual, stat_size):
    # The stores commit an upload when the stream ends: the end of the source is confirmed before the last
    # bytes are handed over, so the upload fails uncommitted.
    stream = _ExactStream(_SourceReader(io.BytesIO(actual), "file:///src/f", stat_size, None), stat_size)
    handed = []
    with pytest.raises(_SizeMismatch, match="changed while being copied"):
        while data := stream.read(3):
            handed.append(data)
    assert sum(map(len, handed)) < max(stat_size, 1)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="part_size"):
        TransferSettings(part_size=1024)
    with pytest.raises(ValueError, match="in_flight"):
        TransferSettings(in_flight=0)


# -- GCS, Azure and OSS ----------------------------------------------------------------------------------

def _gcs(request, path: str = "") -> tuple[StorageConfig, str]:
    base = f"gs://{request.getfixturevalue('gcs_bucket')}"
    return request.getfixturevalue("gcs_config"), f"{base}/{path}" if path else base


def _azure(request, path: str = "") -> tuple[StorageConfig, str]:
    return request.getfixturevalue("azure_config"), azure_uri(request.getfixturevalue("azure_container"), path)


def _store(request, kind: str, path: str) -> tuple[StorageConfig, str]:
    return _gcs(request, path) if kind == "gcs" else _azure(request, path)


REMOTE = [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)]


@pytest.mark.gcs
def test_s3_to_gcs_streams_verifies_and_skips_the_second_time(request, s3_config, s3_bucket):
    gcs_config, dr = _gcs(request, "dr")
    small, big = _payload(300_000, 20), _payload(17 * MiB + 3, 21)   # big: above the single-upload size
    src_io = RoutingFileIO(s3_config)
    _put(src_io, f"s3://{s3_bucket}/cp/small", small)
    _put(src_io, f"s3://{s3_bucket}/cp/big", big)
    transfer = Transfer(s3_config, gcs_config, [dr], TransferSettings(checksum=True),
                        source_roots=[f"s3://{s3_bucket}/cp"])
    items = [TransferItem(f"s3://{s3_bucket}/cp/{n}", f"{dr}/cp/{n}", len(d)) for n, d in (("small", small), ("big", big))]
    first = {r.target: r for r in transfer.run(items)}
    for name, data in (("small", small), ("big", big)):
        r = first[f"{dr}/cp/{name}"]
        assert (r.outcome, r.method, r.size, r.checksum, r.retries) == (TransferOutcome.COPIED, "stream", len(data),
                                                                       _sha(data), 0)
        assert RoutingFileIO(gcs_config).read_bytes(f"{dr}/cp/{name}") == data
    second = list(transfer.run(items))
    assert {(r.outcome, r.checksum) for r in second} == {(TransferOutcome.SKIPPED, _sha(small)),
                                                         (TransferOutcome.SKIPPED, _sha(big))}


@pytest.mark.parametrize("kind", REMOTE)
def test_gcs_and_azure_to_local(request, kind, dirs):
    _, dst = dirs
    config, cp = _store(request, kind, "cp")
    data = _payload(5 * MiB + 17, 22)
    _put(RoutingFileIO(config), f"{cp}/job/shared/f", data)
    _put(RoutingFileIO(config), f"{cp}/job/shared/empty", b"")
    transfer = Transfer(config, LOCAL, [dst], TransferSettings(checksum=True), source_roots=[cp])
    results = {r.target: r for r in transfer.run([TransferItem(f"{cp}/job/shared/f", f"{dst}/job/shared/f", len(data)),
                                                   TransferItem(f"{cp}/job/shared/empty", f"{dst}/job/shared/empty", 0)])}
    assert (results[f"{dst}/job/shared/f"].outcome, results[f"{dst}/job/shared/f"].method,
            results[f"{dst}/job/shared/f"].checksum) == (TransferOutcome.COPIED, "stream", _sha(data))
    assert results[f"{dst}/job/shared/empty"].outcome is TransferOutcome.COPIED
    assert RoutingFileIO().read_bytes(f"{dst}/job/shared/f") == data
    assert os.path.getsize(f"{dst[7:]}/job/shared/empty") == 0


@pytest.mark.parametrize("kind", REMOTE)
def test_local_to_gcs_and_azure_streams_create_only(request, kind, dirs):
    src, _ = dirs
    config, dr = _store(request, kind, "dr")
    data = _payload(200_000, 23)
    _put(RoutingFileIO(), f"{src}/f", data)
    _put(RoutingFileIO(), f"{src}/empty", b"")
    transfer = Transfer(LOCAL, config, [dr], source_roots=[src])
    assert _one(transfer, f"{src}/f", f"{dr}/f", len(data)).outcome is TransferOutcome.COPIED
    assert _one(transfer, f"{src}/empty", f"{dr}/empty", 0).outcome is TransferOutcome.COPIED
    fio = RoutingFileIO(config)
    assert fio.read_bytes(f"{dr}/f") == data and fio.stat(f"{dr}/empty").size == 0
    # A target of another size (an earlier copy by another tool) is replaced, as on S3 and local.
    _put(fio, f"{dr}/f", data[:100])
    assert _one(transfer, f"{src}/f", f"{dr}/f", len(data)).outcome is TransferOutcome.COPIED
    assert fio.read_bytes(f"{dr}/f") == data


@pytest.mark.parametrize("kind", REMOTE)
def test_target_created_by_another_writer_after_the_stat_is_not_replaced(request, kind, dirs, monkeypatch):
    """Absent when stat'ed, the target is written create-only; another writer's object that appears in
    between makes the upload fail, and the next attempt finds it and skips it (same size)."""
    src, _ = dirs
    config, dr = _store(request, kind, "dr")
    data = _payload(50_000, 24)
    _put(RoutingFileIO(), f"{src}/f", data)
    fio = RoutingFileIO(config)
    other = fio.write(f"{dr}/f", data)          # the other writer got there first
    transfer = Transfer(LOCAL, config, [dr], TransferSettings(backoff_base=0.01), source_roots=[src])
    _target_unseen_at_first_stat(monkeypatch)
    result = _one(transfer, f"{src}/f", f"{dr}/f", len(data))
    assert (result.outcome, result.retries) == (TransferOutcome.SKIPPED, 1)
    assert fio.stat(f"{dr}/f").etag == other.etag   # untouched: the create-only upload was refused


@pytest.mark.parametrize("kind", REMOTE)
def test_same_store_copies_server_side_pinned_to_the_stated_version(request, kind, monkeypatch):
    config, base = _store(request, kind, "")
    cp, dr = f"{base}/cp", f"{base}/dr"
    fio = RoutingFileIO(config)
    data = _payload(70_000, 25)
    _put(fio, f"{cp}/f", data)
    transfer = Transfer(config, None, [dr], TransferSettings(checksum=True), source_roots=[cp])
    item = TransferItem(f"{cp}/f", f"{dr}/f", len(data))
    first, second = transfer.copy_one(item), transfer.copy_one(item)
    assert (first.outcome, first.method, first.checksum) == (TransferOutcome.COPIED, "server_side", _sha(data))
    assert (second.outcome, second.checksum) == (TransferOutcome.SKIPPED, _sha(data))
    assert fio.read_bytes(f"{dr}/f") == data

    # The source is rewritten (same size) between the copier's stat and its copy: the store refuses the copy.
    _put(fio, f"{cp}/g", data)
    _source_rewritten_after_stat(monkeypatch, fio, data[::-1])
    changed = Transfer(config, None, [dr], source_roots=[cp]).copy_one(TransferItem(f"{cp}/g", f"{dr}/g"))
    assert (changed.outcome, changed.retries) == (TransferOutcome.SOURCE_CHANGED, 0)
    assert "changed since it was stat'ed" in changed.message
    assert not fio.exists(f"{dr}/g")


@pytest.mark.gcs
def test_gcs_checksums_catch_a_same_size_corrupted_target_in_size_mode(request):
    config, base = _gcs(request)
    fio = RoutingFileIO(config)
    data = _payload(10_000, 26)
    _put(fio, f"{base}/cp/f", data)
    _put(fio, f"{base}/dr/f", data[::-1])   # same size, other bytes: another CRC32C
    transfer = Transfer(config, None, [f"{base}/dr"])
    result = transfer.copy_one(TransferItem(f"{base}/cp/f", f"{base}/dr/f"))
    assert (result.outcome, result.method) == (TransferOutcome.COPIED, "server_side")
    assert fio.read_bytes(f"{base}/dr/f") == data
    assert transfer.copy_one(TransferItem(f"{base}/cp/f", f"{base}/dr/f")).outcome is TransferOutcome.SKIPPED


@pytest.mark.parametrize("kind", REMOTE)
def test_source_rewritten_while_streamed_is_source_changed_and_writes_nothing(request, kind, dirs, monkeypatch):
    _, dst = dirs
    config, cp = _store(request, kind, "cp")
    data = _payload(300_000, 27)
    fio = RoutingFileIO(config)
    _put(fio, f"{cp}/f", data)
    _source_rewritten_after_open(monkeypatch, fio, data[::-1])
    transfer = Transfer(config, LOCAL, [dst], source_roots=[cp])
    result = _one(transfer, f"{cp}/f", f"{dst}/f", len(data))
    assert (result.outcome, result.retries) == (TransferOutcome.SOURCE_CHANGED, 0)
    assert os.listdir(dst[7:]) == []


@pytest.mark.gcs
def test_gcs_source_gone_before_the_copy_is_source_missing(request, monkeypatch):
    config, base = _gcs(request)
    fio = RoutingFileIO(config)
    _put(fio, f"{base}/cp/f", b"data")
    original = Transfer._stat_source

    def then_deleted(self, source):
        info = original(self, source)
        fio.delete_many([source])
        return info

    monkeypatch.setattr(Transfer, "_stat_source", then_deleted)
    result = Transfer(config, None, [f"{base}/dr"]).copy_one(TransferItem(f"{base}/cp/f", f"{base}/dr/f"))
    assert result.outcome is TransferOutcome.SOURCE_MISSING and not fio.exists(f"{base}/dr/f")


@pytest.mark.azure
@pytest.mark.gcs
def test_gcs_to_azure_streams_between_stores(request):
    gcs_config, cp = _gcs(request, "cp")
    azure_config, dr = _azure(request, "dr")
    data = _payload(1 * MiB + 5, 28)
    _put(RoutingFileIO(gcs_config), f"{cp}/f", data)
    transfer = Transfer(gcs_config, azure_config, [dr], TransferSettings(checksum=True), source_roots=[cp])
    result = _one(transfer, f"{cp}/f", f"{dr}/f", len(data))
    assert (result.outcome, result.method, result.checksum) == (TransferOutcome.COPIED, "stream", _sha(data))
    assert RoutingFileIO(azure_config).read_bytes(f"{dr}/f") == data


@pytest.mark.s3
def test_oss_targets_and_server_side_copies_through_the_s3_api(dirs, s3_config):
    """The session's S3 server (SeaweedFS) stands in for OSS's S3-compatible endpoint (path style)."""
    src, _ = dirs
    config = StorageConfig(oss_endpoint=s3_config.endpoint, oss_access_key_id=s3_config.access_key_id,
                           oss_access_key_secret=s3_config.secret_access_key, oss_path_style=True)
    bucket = make_bucket(config.oss_s3_config())
    data = _payload(40_000, 29)
    _put(RoutingFileIO(), f"{src}/f", data)
    upload = _one(Transfer(LOCAL, config, [f"oss://{bucket}/cp"], source_roots=[src]), f"{src}/f",
                  f"oss://{bucket}/cp/f", len(data))
    assert (upload.outcome, upload.method) == (TransferOutcome.COPIED, "stream")
    copied = _one(Transfer(config, None, [f"oss://{bucket}/dr"], source_roots=[f"oss://{bucket}/cp"]),
                  f"oss://{bucket}/cp/f", f"oss://{bucket}/dr/f", len(data))
    assert (copied.outcome, copied.method) == (TransferOutcome.COPIED, "server_side")
    assert RoutingFileIO(config).read_bytes(f"oss://{bucket}/dr/f") == data


@pytest.mark.parametrize("kind", REMOTE)
def test_a_same_size_foreign_object_at_a_remote_target_is_replaced_an_equal_one_skipped(request, kind, dirs):
    """Issue 28 on GCS and Azure targets: a same-size object with other bytes is proven foreign by the
    store's own content hash (GCS CRC32C, Azure Content-MD5) against one computed from the source, and
    replaced; one with the source's bytes is proven equal the same way and skipped, untouched."""
    src, _ = dirs
    config, dr = _store(request, kind, "dr")
    data = _payload(40_000, 26)
    _put(RoutingFileIO(), f"{src}/f", data)
    fio = RoutingFileIO(config)
    fio.write(f"{dr}/foreign", data[::-1])
    equal = fio.write(f"{dr}/equal", data)
    assert fio.stat(f"{dr}/equal").checksum, "the store should hold a content hash of a single-shot upload"
    transfer = Transfer(LOCAL, config, [dr], source_roots=[src])
    replaced = _one(transfer, f"{src}/f", f"{dr}/foreign", len(data))
    assert replaced.outcome is TransferOutcome.COPIED and fio.read_bytes(f"{dr}/foreign") == data
    skipped = _one(transfer, f"{src}/f", f"{dr}/equal", len(data))
    assert skipped.outcome is TransferOutcome.SKIPPED and fio.stat(f"{dr}/equal").etag == equal.etag


# -- a store that ignores what it accepts: its self-test decides, the copy re-checks --------------------------------

# The stores that enforce (SeaweedFS, the emulator with the checks of tests/plugins/gcs_emulator.py) and those that
# accept the preconditions and ignore them (moto and the GCS emulator as released).
SERVERS = [pytest.param("plain_moto_server", marks=pytest.mark.s3), pytest.param("seaweedfs", marks=pytest.mark.s3),
           pytest.param("plain_gcs_emulator", marks=pytest.mark.gcs),
           pytest.param("gcs_emulator", marks=pytest.mark.gcs)]
ENFORCING = ("seaweedfs", "gcs_emulator")


def _server_store(request, server: str) -> tuple[StorageConfig, str]:
    from tests.plugins.object_stores import make_gcs_bucket

    config = request.getfixturevalue(server).config()
    if "gcs" in server:
        return config, f"gs://{make_gcs_bucket(config, 'tr')}"
    return config, f"s3://{make_bucket(config, 'tr')}"


@pytest.mark.parametrize("server", SERVERS)
def test_a_create_only_copy_the_store_ignores_is_preceded_by_an_existence_check(request, server, monkeypatch):
    """Absent when stat'ed, the target is copied server-side create-only; another writer's object appears in
    between. SeaweedFS refuses the CopyObject (If-None-Match: *), the checked GCS emulator the rewrite
    (ifGenerationMatch=0); moto and the emulator as released would replace the object, so their self-tests'
    verdicts make the copier look the target up just before the copy. Either way the object is found by the retry
    and skipped, never replaced blindly."""
    from statekeeper.storage.enforcement import Guard

    config, base = _server_store(request, server)
    fio = RoutingFileIO(config)
    data = _payload(40_000, 27)
    _put(fio, f"{base}/cp/f", data)
    other = fio.write(f"{base}/dr/f", data)      # the other writer got there first
    transfer = Transfer(config, None, [f"{base}/dr"], TransferSettings(backoff_base=0.01),
                        source_roots=[f"{base}/cp"])
    calls = _target_unseen_at_first_stat(monkeypatch)
    result = _one(transfer, f"{base}/cp/f", f"{base}/dr/f", len(data))
    assert (result.outcome, result.retries) == (TransferOutcome.SKIPPED, 1), result
    assert fio.stat(f"{base}/dr/f").etag == other.etag
    enforced = transfer.enforcement.enforced(f"{base}/dr", Guard.CREATE_ONLY_COPY)
    assert enforced is (server in ENFORCING)
    # the stale stat, the retry's stat, and where the store does not enforce it the check just before the copy
    assert len(calls) == (2 if enforced else 3)


@pytest.mark.parametrize("server", SERVERS)
def test_a_source_pin_the_store_ignores_is_replaced_by_reading_the_source_before_and_after(request, server,
                                                                                         monkeypatch):
    """The source is rewritten (same size) between the copier's stat and its server-side copy. SeaweedFS refuses
    the CopyObject (CopySourceIfMatch), the checked GCS emulator the rewrite (ifSourceGenerationMatch); moto and the
    emulator as released would copy the new bytes, so their self-tests' verdicts make the copier read the source's
    version again around the copy: SOURCE_CHANGED either way, nothing at the target."""
    from statekeeper.storage.enforcement import Guard, guard_name

    config, base = _server_store(request, server)
    fio = RoutingFileIO(config)
    data = _payload(30_000, 28)
    _put(fio, f"{base}/cp/g", data)
    transfer = Transfer(config, None, [f"{base}/dr"], source_roots=[f"{base}/cp"])
    _source_rewritten_after_stat(monkeypatch, fio, data[::-1])
    changed = transfer.copy_one(TransferItem(f"{base}/cp/g", f"{base}/dr/g"))
    assert (changed.outcome, changed.retries) == (TransferOutcome.SOURCE_CHANGED, 0), changed
    assert not fio.exists(f"{base}/dr/g")
    enforced = transfer.enforcement.enforced(f"{base}/dr", Guard.PINNED_COPY)
    assert enforced is (server in ENFORCING)
    assert ("the copy was refused by the store" if enforced else "re-checked because the store does not enforce "
            f"{guard_name(base[:base.index(':')], Guard.PINNED_COPY)}") in changed.message, changed.message
    assert not fio.exists(f"{base}/dr/g")


# -- the mutation: our requests without their preconditions ---------------------------------------------

@pytest.mark.s3
@pytest.mark.parametrize("guard", ["x-amz-copy-source-if-match", "if-none-match", "if-match"])
@pytest.mark.parametrize("preconditions", ["sent", "dropped"])
def test_on_s3_only_the_precondition_we_send_keeps_the_wrong_bytes_out(guard, preconditions, slow_s3, s3_bucket,
                                                                       dirs, monkeypatch):
    """Each S3 guard of the copier, on SeaweedFS with no layer of ours in front: sent, the server refuses what the
    copier must not do; dropped from our requests on the way (the fault proxy's mutation), the same run writes
    the wrong bytes. So the server enforces the precondition only because we send it, and the precondition tests
    here and in tests/replicate fail if a copier stops sending it. Guards: a server-side copy pinned to the source
    version stat'ed (CopySourceIfMatch), a create-only upload (If-None-Match: *), a streamed read pinned to the
    version opened (If-Match on each ranged GET)."""
    src, dst = dirs
    config, base = slow_s3.config, f"s3://{s3_bucket}"
    fio = RoutingFileIO(config)
    data = _payload(60_000, 30)
    if preconditions == "dropped":
        slow_s3.drop_preconditions({guard})
    if guard == "x-amz-copy-source-if-match":
        _put(fio, f"{base}/cp/f", data)
        _source_rewritten_after_stat(monkeypatch, fio, data[::-1])
        result = Transfer(config, None, [f"{base}/dr"], source_roots=[f"{base}/cp"]).copy_one(
            TransferItem(f"{base}/cp/f", f"{base}/dr/f", len(data)))
        landed = fio.read_bytes(f"{base}/dr/f") if fio.exists(f"{base}/dr/f") else None
        expected = {"sent": (TransferOutcome.SOURCE_CHANGED, 0, None), "dropped": (TransferOutcome.COPIED, 0, data[::-1])}
    elif guard == "if-none-match":
        _put(RoutingFileIO(), f"{src}/f", data)
        fio.write(f"{base}/dr/f", data)                # another writer's object got there first
        other = fio.stat(f"{base}/dr/f")
        time.sleep(1.1)                                # S3's Last-Modified has whole seconds
        _target_unseen_at_first_stat(monkeypatch)
        result = _one(Transfer(LOCAL, config, [f"{base}/dr"], TransferSettings(backoff_base=0.01),
                               source_roots=[src]), f"{src}/f", f"{base}/dr/f", len(data))
        landed = fio.stat(f"{base}/dr/f").mtime == other.mtime   # the other writer's object untouched?
        # Sent: refused, the retry finds the object and skips it. Dropped: the upload replaced it.
        expected = {"sent": (TransferOutcome.SKIPPED, 1, True), "dropped": (TransferOutcome.COPIED, 0, False)}
    else:
        _put(fio, f"{base}/cp/f", data)
        _source_rewritten_after_open(monkeypatch, fio, data[::-1])
        result = _one(Transfer(config, LOCAL, [dst], source_roots=[f"{base}/cp"]), f"{base}/cp/f", f"{dst}/f",
                      len(data))
        landed = open(f"{dst[7:]}/f", "rb").read() if os.path.exists(f"{dst[7:]}/f") else None
        expected = {"sent": (TransferOutcome.SOURCE_CHANGED, 0, None), "dropped": (TransferOutcome.COPIED, 0, data[::-1])}
    assert (result.outcome, result.retries, landed) == expected[preconditions], result
    assert (slow_s3.dropped > 0) == (preconditions == "dropped")
