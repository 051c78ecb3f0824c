"""The codec against real Flink output: every `_metadata` of every harness version and scenario.

Ground truth is Flink's own loader (the harness oracle). For each file we check that the codec
sees exactly what Flink sees (operators, subtasks, every leaf handle with its position, path,
size, inline bytes, segment range and managed directories, referenced files and sizes, inline
totals, properties) and that writing the parsed model back gives the identical bytes.
"""
from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from statekeeper.format import (
    ByteStreamHandle,
    EmptySegmentFileHandle,
    FileHandle,
    FileMergingOperatorHandle,
    MergedChannelStateHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    account,
    extract_references,
    read_metadata,
    to_bytes,
    transform,
)
from statekeeper.uri import join_uri, normalize_uri, parent_uri
from tests.plugins.flink import flink_dedicated_params, flink_params

pytestmark = pytest.mark.flink

_CLASS = {
    "org.apache.flink.runtime.state.memory.ByteStreamStateHandle": "BYTE_STREAM",
    "org.apache.flink.runtime.state.filesystem.FileStateHandle": "FILE",
    "org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle": "RELATIVE",
    "org.apache.flink.runtime.state.filemerging.SegmentFileStateHandle": "SEGMENT",
    "org.apache.flink.runtime.state.filemerging.EmptySegmentFileStateHandle": "EMPTY_SEGMENT",
}

_oracle_cache: dict[tuple[str, str], list[dict]] = {}


def oracle_for(harness, version: str, scenario: str, files: list[Path]) -> list[dict]:
    key = (version, scenario)
    if key not in _oracle_cache:
        _oracle_cache[key] = harness.run_oracle(version, files)
    return _oracle_cache[key]


def _norm_or_none(path):
    return None if path is None else normalize_uri(path)


def oracle_handles(result: dict) -> Counter:
    out = Counter()
    for h in result["handles"]:
        kind = _CLASS.get(h["class"], h["class"])
        dirs = h.get("managed_dirs")
        out[(
            h["operator_id"], h["subtask"], h["slot"], h["role"], h["local_name"], kind,
            _norm_or_none(h["path"]), h["relative_path"], h["size"], h["inline_bytes"],
            h["start_pos"] if kind == "SEGMENT" else None,
            h["logical_file_id"] if kind == "SEGMENT" else None,
            None if dirs is None else tuple(normalize_uri(d) for d in dirs),
        )] += 1
    return out


def codec_handles(model, metadata_uri: str) -> Counter:
    snapshot_dir = parent_uri(normalize_uri(metadata_uri))
    out = Counter()
    pending_dirs: list = [None]

    def visit(site, role, local_name, node):
        t = type(node)
        if t is FileMergingOperatorHandle:
            pending_dirs[0] = (normalize_uri(node.task_owned_dir), normalize_uri(node.shared_dir))
            return node
        if site.slot == "master" or t not in (
            ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle
        ):
            return node
        dirs, pending_dirs[0] = pending_dirs[0], None
        op = site.operator.operator_id
        if t is ByteStreamHandle:
            rec = ("BYTE_STREAM", None, None, node.payload.length, node.payload.length, None, None)
        elif t is FileHandle:
            rec = ("FILE", normalize_uri(node.path), None, node.size, None, None, None)
        elif t is RelativeFileHandle:
            rec = ("RELATIVE", join_uri(snapshot_dir, node.relative_path), node.relative_path, node.size,
                   None, None, None)
        elif t is SegmentFileHandle:
            rec = ("SEGMENT", normalize_uri(node.physical_path), None, node.size, None, node.start_pos,
                   node.logical_file_id)
        else:
            rec = ("EMPTY_SEGMENT", None, None, 0, None, None, None)
        out[(op, site.subtask, site.slot, role, local_name) + rec + (dirs,)] += 1
        return node

    transform(model, visit)
    return out


# The Flink 2.x layouts (ForSt databases in checkpoint storage, changelog DSTL files, a rotated job id)
# are dedicated scenarios: their own tests use them, but the codec is held to Flink's reading of them too.
FLINK2_LAYOUTS = ["forst", "changelog", "rotated_job_id"]


@pytest.mark.parametrize("version,scenario", flink_params() + flink_dedicated_params(FLINK2_LAYOUTS))
def test_codec_matches_flink_and_round_trips(flink_harness, flink_fixture, version, scenario):
    fixture = flink_fixture(version, scenario)
    files = fixture.metadata_files()
    assert files, f"{version}/{scenario}: fixture has no _metadata"
    results = oracle_for(flink_harness, version, scenario, files)
    expected_version = flink_harness.metadata_version_for(version)
    for path, oracle in zip(files, results):
        assert oracle.get("error") is None, f"Flink cannot load {path}: {oracle['error']}"
        data = path.read_bytes()
        uri = path.as_uri()
        model = read_metadata(path, uri)
        where = f"{version}/{scenario}: {path}"

        # --- header, properties, master state
        assert model.version == oracle["metadata_version"] == expected_version, where
        assert model.checkpoint_id == oracle["checkpoint_id"], where
        props = oracle["properties"]
        if props is None:
            assert model.properties is None, where
        else:
            p = model.properties
            assert (p.snapshot_type, p.format, p.sharing) == (
                props["snapshot_type"], props["format"], props["sharing"]), where
        assert [(m.name, m.version, m.payload.length) for m in model.master_states] == [
            (m["name"], m["version"], m["bytes"]) for m in oracle["master_states"]], where

        # --- operators and subtasks
        assert len(model.operators) == len(oracle["operators"]), where
        for op, o in zip(model.operators, oracle["operators"]):
            assert op.operator_id == o["id"], where
            assert (op.name, op.uid) == (o["name"], o["uid"]), where
            assert (op.parallelism, op.max_parallelism, op.fully_finished) == (
                o["parallelism"], o["max_parallelism"], o["fully_finished"]), where
            coord = op.coordinator.payload.length if op.coordinator else None
            assert coord == o["coordinator_inline_bytes"], where
            assert sorted((s.index, s.finished) for s in op.subtasks) == sorted(
                (s["index"], s["finished"]) for s in o["subtasks"]), where

        # --- every leaf handle, with position, path, sizes, segments, managed dirs
        assert codec_handles(model, uri) == oracle_handles(oracle), where

        # --- V6 merged channel blobs decode and account for the whole handle
        for op in model.operators:
            for st in op.subtasks:
                for h in st.input_channels + st.output_channels:
                    if isinstance(h, MergedChannelStateHandle):
                        assert sum(e.size for e in h.entries(path)) == h.state_size, where

        # --- referenced files and inline bytes, through the public extraction API
        refs = extract_references(model, uri)
        expected_files = {normalize_uri(f["path"]): f["size"] for f in oracle["referenced_files"]}
        assert refs.physical_files() == expected_files, where
        acc = account(model)
        assert acc.handle_inline_bytes + acc.coordinator_bytes == oracle["inline_bytes_total"], where
        assert refs.inline_bytes == acc.inline_bytes, where
        assert acc.total_size == len(data), where

        # --- byte-identical round trip, streaming payloads and fully loaded
        out = io.BytesIO()
        from statekeeper.format import write_metadata

        assert write_metadata(model, out, inline_source=path) == len(data), where
        assert out.getvalue() == data, where
        assert to_bytes(read_metadata(io.BytesIO(data), uri, load_inline=True)) == data, where
