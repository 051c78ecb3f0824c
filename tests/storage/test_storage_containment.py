"""Physical containment: symlinks, special files, undecodable names and resolved root overlap,
with real files on local disk, and a missing S3 prefix on a real S3 endpoint (SeaweedFS)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from statekeeper.index.planner import plan_buckets
from statekeeper.storage import (
    EmptyRootError,
    GuardedFileIO,
    LocalFileIO,
    ObjectNotFoundError,
    ObjectType,
    RootConfigError,
    RootNotFoundError,
    Roots,
    RoutingFileIO,
    SymlinkRefusedError,
    UnreadableObjectError,
)
from statekeeper.storage.s3 import S3FileIO

SECRET = b"root:x:0:0:do-not-leak\n"


@pytest.fixture
def escape(tmp_path):
    """root/job/escape -> outside/ (a directory symlink inside a root pointing outside it)."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_bytes(b"keep me")
    (tmp_path / "root" / "job").mkdir(parents=True)
    (tmp_path / "root" / "job" / "escape").symlink_to(tmp_path / "outside")
    guarded = GuardedFileIO(RoutingFileIO(), Roots([str(tmp_path / "root")]))
    return tmp_path, guarded


def test_write_through_a_directory_symlink_is_refused(escape):
    tmp_path, fio = escape
    with pytest.raises(SymlinkRefusedError, match="escape is a symlink inside root"):
        fio.write(f"file://{tmp_path}/root/job/escape/planted", b"x")
    with pytest.raises(SymlinkRefusedError):
        fio.write(f"file://{tmp_path}/root/job/escape/new/deeper", b"x")
    assert sorted(os.listdir(tmp_path / "outside")) == ["victim"]


def test_delete_through_a_directory_symlink_is_refused(escape):
    tmp_path, fio = escape
    fio.write(f"file://{tmp_path}/root/job/ok", b"1")
    report = fio.delete_many([f"file://{tmp_path}/root/job/escape/victim", f"file://{tmp_path}/root/job/ok"])
    assert report.deleted == [f"file://{tmp_path}/root/job/ok"]
    assert [(f.uri, f.code) for f in report.failed] == [(f"file://{tmp_path}/root/job/escape/victim", "Symlink")]
    assert (tmp_path / "outside" / "victim").read_bytes() == b"keep me"
    # The link itself is an object nobody deletes through the guard either.
    report = fio.delete_many([f"file://{tmp_path}/root/job/escape"])
    assert [f.code for f in report.failed] == ["Symlink"] and (tmp_path / "root" / "job" / "escape").is_symlink()


def test_copy_and_reads_through_a_directory_symlink_are_refused(escape):
    tmp_path, fio = escape
    fio.write(f"file://{tmp_path}/root/job/src", b"payload")
    with pytest.raises(SymlinkRefusedError):
        fio.copy(f"file://{tmp_path}/root/job/src", f"file://{tmp_path}/root/job/escape/copied")
    with pytest.raises(SymlinkRefusedError):
        fio.copy(f"file://{tmp_path}/root/job/escape/victim", f"file://{tmp_path}/root/job/stolen")
    for read in (fio.read_bytes, fio.stat, fio.open_input):
        with pytest.raises(SymlinkRefusedError):
            read(f"file://{tmp_path}/root/job/escape/victim")
    with pytest.raises(SymlinkRefusedError):
        list(fio.list(f"file://{tmp_path}/root/job/escape"))
    assert sorted(os.listdir(tmp_path / "outside")) == ["victim"]
    assert not (tmp_path / "root" / "job" / "stolen").exists()


def test_file_symlink_is_listed_as_itself_and_never_read_through(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    chk = tmp_path / "root" / "job" / "chk-12"
    chk.mkdir(parents=True)
    (chk / "_metadata").symlink_to(secret)
    (chk / "dangling").symlink_to(tmp_path / "gone")
    listing = {i.uri: i for i in LocalFileIO().list(f"file://{tmp_path}/root")}
    meta, dangling = listing[f"file://{chk}/_metadata"], listing[f"file://{chk}/dangling"]
    assert meta.object_type == dangling.object_type == ObjectType.SYMLINK
    assert meta.size == len(str(secret))  # the link's own size, not the target's
    for fio in (LocalFileIO(), GuardedFileIO(RoutingFileIO(), Roots([str(tmp_path / "root")]))):
        with pytest.raises((UnreadableObjectError, SymlinkRefusedError)) as err:
            fio.read_bytes(f"file://{chk}/_metadata")
        assert "symlink" in str(err.value) and "do-not-leak" not in str(err.value)
        with pytest.raises((ObjectNotFoundError, SymlinkRefusedError), match="symlink"):
            fio.stat(f"file://{chk}/_metadata")
    with pytest.raises(UnreadableObjectError, match="symlink"):
        LocalFileIO().copy(f"file://{chk}/_metadata", f"file://{tmp_path}/root/copied")
    assert not (tmp_path / "root" / "copied").exists()


def test_fifo_and_metadata_directory_are_listed_and_never_opened(tmp_path):
    chk = tmp_path / "root" / "job" / "chk-3"
    chk.mkdir(parents=True)
    os.mkfifo(chk / "fifo")
    (tmp_path / "root" / "job" / "chk-4" / "_metadata").mkdir(parents=True)
    (tmp_path / "root" / "job" / "chk-4" / "_metadata" / "inside").write_bytes(b"1")
    listing = {i.uri: i.object_type for i in LocalFileIO().list(f"file://{tmp_path}/root")}
    assert listing == {
        f"file://{chk}/fifo": ObjectType.FIFO,
        f"file://{tmp_path}/root/job/chk-4/_metadata": ObjectType.DIRECTORY,
        f"file://{tmp_path}/root/job/chk-4/_metadata/inside": ObjectType.FILE,
    }
    # Opening a FIFO for reading blocks until a writer appears: the read must fail at once instead.
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _capture(outcome, LocalFileIO().read_bytes, f"file://{chk}/fifo"),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], UnreadableObjectError) and "is a fifo" in str(outcome[0])
    with pytest.raises(UnreadableObjectError, match="is a directory"):
        LocalFileIO().read_bytes(f"file://{tmp_path}/root/job/chk-4/_metadata")


def _capture(out: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        out.append(exc)


def test_undecodable_name_has_a_reversible_utf8_uri(tmp_path):
    shared = tmp_path / "root" / "job" / "shared"
    shared.mkdir(parents=True)
    raw = os.fsencode(shared) + b"/\xff\xfe"
    os.close(os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644))
    fio = GuardedFileIO(RoutingFileIO(), Roots([str(tmp_path / "root")]))
    [info] = list(fio.list(f"file://{tmp_path}/root"))
    assert info.uri == f"file://{shared}/\x00ff\x00fe" and info.uri.encode("utf-8")
    assert fio.stat(info.uri).etag == info.etag and fio.read_bytes(info.uri) == b""
    report = fio.delete_many([info.uri])
    assert report.deleted == [info.uri] and not os.path.lexists(raw)
    # A literal name that merely looks like the escape is a different object.
    (shared / "%ff").write_bytes(b"1")
    with pytest.raises(ObjectNotFoundError):
        fio.stat(f"file://{shared}/\x00ff")


# -- roots ------------------------------------------------------------------------------------------

def test_root_symlinked_to_another_root_overlaps(tmp_path):
    (tmp_path / "a" / "inner").mkdir(parents=True)
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "c").symlink_to(tmp_path / "a" / "inner")
    with pytest.raises(RootConfigError, match="overlap.*resolved"):
        Roots([str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(RootConfigError, match="overlap"):
        Roots([str(tmp_path / "a"), str(tmp_path / "c")])
    (tmp_path / "d").mkdir()
    assert len(Roots([str(tmp_path / "a"), str(tmp_path / "d")])) == 2


@pytest.mark.parametrize("where", ["inside", "same", "contains", "linked-inside"])
def test_warehouse_overlapping_a_root_is_a_configuration_error(tmp_path, where):
    root = tmp_path / "checkpoints"
    (root / "statekeeper").mkdir(parents=True)
    warehouse = {"inside": root / "statekeeper", "same": root, "contains": tmp_path,
                 "linked-inside": tmp_path / "wh-link"}[where]
    if where == "linked-inside":
        warehouse.symlink_to(root / "statekeeper")
    with pytest.raises(RootConfigError, match="warehouse .* overlaps root"):
        Roots([str(root)]).check_separate(str(warehouse), "warehouse")
    Roots([str(root)]).check_separate(str(tmp_path / "elsewhere"), "warehouse")


# -- missing S3 prefix --------------------------------------------------------------------------------

@pytest.mark.s3
def test_s3_root_prefix_without_objects_is_refused_unless_allowed(s3_config, s3_bucket):
    fio = S3FileIO(s3_config)
    fio.write(f"s3://{s3_bucket}/checkpoints/job/chk-1/_metadata", b"x")
    fio.write(f"s3://{s3_bucket}/checkpointsX/other", b"x")  # a sibling prefix does not count
    fio.check_directory(f"s3://{s3_bucket}/checkpoints")
    with pytest.raises(EmptyRootError, match=f"no object under s3://{s3_bucket}/checkpoint/"):
        fio.check_directory(f"s3://{s3_bucket}/checkpoint")
    with pytest.raises(EmptyRootError):
        fio.check_directory(f"s3://{s3_bucket}/checkpoints/job/chk-1/_metadata")  # an object, not a prefix

    guarded = GuardedFileIO(RoutingFileIO(s3_config), Roots([f"s3://{s3_bucket}/checkpoint"]))
    roots = guarded.roots
    with pytest.raises(RootNotFoundError, match="--allow-empty-root") as err:
        plan_buckets(guarded, roots, {})
    assert f"s3://{s3_bucket}/checkpoint" in str(err.value)
    planned = plan_buckets(guarded, roots, {}, allow_empty_root=True)
    assert [j for p in planned for j in p.plan.job_dirs] == ["."]
    # A missing bucket stays an error even when empty roots are allowed.
    missing = GuardedFileIO(RoutingFileIO(s3_config), Roots([f"s3://{s3_bucket}-gone/checkpoints"]))
    with pytest.raises(RootNotFoundError, match="does not exist"):
        plan_buckets(missing, missing.roots, {}, allow_empty_root=True)


def test_local_paths_of_the_escape_reject_stray_nul(tmp_path):
    from statekeeper.storage import StorageError, local_path

    assert local_path(f"file://{tmp_path}/a\x00ff") == f"{tmp_path}/a\udcff"
    with pytest.raises(StorageError, match="NUL"):
        local_path(f"file://{tmp_path}/a\x0041")
    assert Path(local_path(f"file://{tmp_path}/plain")) == tmp_path / "plain"
