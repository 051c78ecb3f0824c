"""The re-list's tasks without Spark: a `_metadata` that appeared after the index is found and
parsed; one that is not a regular file blocks (an error row), never counts as absent."""
from __future__ import annotations

import os

import pyarrow as pa

from statekeeper.gc.relist import FindMetadata, ParseMetadata
from statekeeper.storage import StorageConfig
from statekeeper.uri import normalize_uri


def rows(task, column: str, values: list[str]) -> list[dict]:
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=[column])
    return [r for out in task([batch]) for r in out.to_pylist()]


def test_symlinked_metadata_after_the_index_blocks(tmp_path):
    root = tmp_path / "checkpoints"
    job = root / "job"
    (job / "chk-1").mkdir(parents=True)
    (job / "chk-2").mkdir()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not a checkpoint")
    os.symlink(target, job / "chk-2" / "_metadata")
    roots = [normalize_uri(str(root))]
    storage = StorageConfig()
    found = rows(FindMetadata(roots, storage), "dir", [normalize_uri(str(job))])
    link = normalize_uri(str(job / "chk-2" / "_metadata"))
    assert [r["uri"] for r in found] == [link]          # found, not mistaken for absent
    parsed = rows(ParseMetadata(roots, storage), "uri", [link])
    assert len(parsed) == 1 and parsed[0]["error"] and "symlink" in parsed[0]["error"]
    assert rows(ParseMetadata(roots, storage), "uri", [normalize_uri(str(job / "chk-1" / "_metadata"))]) == [
        {"metadata_uri": normalize_uri(str(job / "chk-1" / "_metadata")), "file_uri": None, "error": None}]
