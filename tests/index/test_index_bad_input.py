"""Bad input that used to slip through the index, planted in a COPY of a real Flink store and
indexed through Spark: special objects at `_metadata` positions, symlinks inside a root, a file
name that is not UTF-8, an S3 root prefix with nothing under it."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO
from statekeeper.tables import Warehouse
from tests.index.support import run_index, table_rows
from tests.plugins.s3 import s3_env

pytestmark = [pytest.mark.flink, pytest.mark.spark]

VERSION = harness.FLINK_VERSIONS[-1]
SECRET = b"root:x:0:0:do-not-leak\n"
SCRIPT = Path(__file__).resolve().parents[2] / "spark_jobs" / "index_checkpoints.py"


@pytest.fixture(scope="module")
def planted(flink_fixture, spark, tmp_path_factory):
    """One index run over a store copy with every kind of bad object planted in one job dir."""
    base = tmp_path_factory.mktemp("bad-input")
    store = base / "store"
    shutil.copytree(flink_fixture(VERSION, "savepoints").root, store, symlinks=False)
    job = next(p for p in (store / "checkpoints").iterdir() if p.is_dir())
    outside = base / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"keep me")
    (base / "passwd").write_bytes(SECRET)
    special = {}
    for n, kind in ((9001, "fifo"), (9002, "dangling"), (9003, "directory"), (9004, "secret")):
        chk = job / f"chk-{n}"
        chk.mkdir()
        meta = chk / "_metadata"
        if kind == "fifo":
            os.mkfifo(meta)
        elif kind == "dangling":
            meta.symlink_to(base / "no-such-file")
        elif kind == "directory":
            meta.mkdir()
        else:
            meta.symlink_to(base / "passwd")
        special[kind] = f"file://{meta}"
    (job / "escape").symlink_to(outside)
    undecodable = os.fsencode(job / "shared") + b"/\xff\xfe"
    fd = os.open(undecodable, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"sst")
    os.close(fd)
    roots = [str(store / "checkpoints"), str(store / "savepoints")]
    warehouse = Warehouse(str(base / "wh"))
    result = run_index(spark, roots, warehouse)
    return result, warehouse, job, special, undecodable, roots


def test_special_metadata_objects_become_unreadable_snapshot_rows(planted):
    result, warehouse, job, special, _, _ = planted
    assert result.status == "succeeded"
    snapshots = {r["uri"]: r for r in table_rows(warehouse, "snapshots")}
    expected = {"fifo": "is a fifo", "dangling": "is a symlink", "directory": "is a directory",
                "secret": "is a symlink"}
    for kind, uri in special.items():
        row = snapshots[uri]
        assert row["status"] == "unreadable", (kind, row)
        assert row["error"].startswith(uri) and expected[kind] in row["error"]
        assert row["layout_kind"] == "checkpoint_metadata" and row["dir_checkpoint_id"] == int(uri.split("chk-")[1][:4])
    # The real snapshots of the same job are still parsed.
    assert sum(1 for r in snapshots.values() if r["status"] == "ok") >= 1
    assert "do-not-leak" not in json.dumps(result.to_mapping(), default=str)
    assert not any("do-not-leak" in (r["error"] or "") for r in snapshots.values())

    files = {r["uri"]: r for r in table_rows(warehouse, "files")}
    assert {k: files[u]["kind"] for k, u in special.items()} == {
        "fifo": "fifo", "dangling": "symlink", "directory": "directory", "secret": "symlink"}
    escape = f"file://{job}/escape"
    assert files[escape]["kind"] == "symlink"
    assert not any(u.startswith(escape + "/") for u in files), "a directory symlink was followed"
    assert any(e.startswith(f"{escape}: a symlink") for e in result.errors)


def test_symlink_rows_cannot_be_deleted_through(planted):
    _, warehouse, job, special, _, roots = planted
    fio = GuardedFileIO(RoutingFileIO(), Roots(roots))
    report = fio.delete_many([f"file://{job}/escape/victim", special["secret"]])
    assert sorted(f.code for f in report.failed) == ["Symlink", "Symlink"] and not report.deleted
    assert (job.parent.parent.parent / "outside" / "victim").read_bytes() == b"keep me"
    assert (job / "chk-9004" / "_metadata").is_symlink()


def test_undecodable_name_is_an_addressable_files_row(planted):
    result, warehouse, job, _, undecodable, roots = planted
    uri = f"file://{job}/shared/\x00ff\x00fe"
    files = {r["uri"]: r for r in table_rows(warehouse, "files")}
    row = files[uri]
    assert row["kind"] == "shared" and row["size"] == 3
    assert row["relative_path"] == f"{job.name}/shared/\x00ff\x00fe"
    # The row names the object exactly: reading and deleting by the row's URI hit the bytes name.
    fio = GuardedFileIO(RoutingFileIO(), Roots(roots))
    assert fio.read_bytes(row["uri"]) == b"sst"
    assert fio.delete_many([row["uri"]]).deleted == [uri]
    assert not os.path.lexists(undecodable)


@pytest.mark.s3
def test_cli_refuses_an_empty_s3_root_unless_allowed(spark, s3_config, s3_bucket, monkeypatch, tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import index_checkpoints
    finally:
        sys.path.remove(str(SCRIPT.parent))
    for name, value in s3_env(s3_config).items():
        monkeypatch.setenv(name, value)
    RoutingFileIO(s3_config).write(f"s3://{s3_bucket}/checkpoints/other", b"x")
    root = f"s3://{s3_bucket}/checkpoint"  # a typo: no object under it
    args = ["--roots", root, "--warehouse", str(tmp_path / "wh"), "--progress-interval", "0"]
    refused = tmp_path / "refused.json"
    assert index_checkpoints.main([*args, "--result-json", str(refused)]) == 2
    error = json.loads(refused.read_text())["error"]
    assert error.startswith("EmptyRootError") and root in error and "--allow-empty-root" in error
    allowed = tmp_path / "allowed.json"
    assert index_checkpoints.main([*args, "--allow-empty-root", "--result-json", str(allowed)]) == 0
    assert json.loads(allowed.read_text())["status"] == "succeeded"
