"""rewrite_prefixes / externalize_inline on hand-built models (real-Flink restores of rewritten
checkpoints are in test_format_harness.py)."""
from __future__ import annotations

import io
from dataclasses import replace

import pytest

from statekeeper.format import (
    ByteStreamHandle,
    FileHandle,
    FileMergingOperatorHandle,
    RelativeFileHandle,
    RewriteError,
    SegmentFileHandle,
    externalize_inline,
    extract_references,
    read_metadata,
    rewrite_prefixes,
    to_bytes,
    transform,
)
from tests.format.support.samples import OTHER, ROOT, sample_model

URI = f"{ROOT}/chk-7/_metadata"


def _strings(model, types):
    out = []

    def visit(site, role, local_name, node):
        if isinstance(node, types):
            out.append(node)
        return node

    transform(model, visit)
    return out


def test_prefix_rewrite_touches_every_absolute_location_and_nothing_else():
    data = to_bytes(sample_model(6))
    model = read_metadata(io.BytesIO(data), URI)
    res = rewrite_prefixes(model, {
        "s3://bucket/ckpt": "s3a://dr-bucket/restore/ckpt",
        "s3://dstl/job": "s3://dr-dstl/job",
    })
    assert not res.unmapped
    new = res.model
    for fh in _strings(new, FileHandle):
        assert fh.path.startswith(("s3a://dr-bucket/restore/ckpt/", "s3://dr-dstl/job/")), fh.path
    for seg in _strings(new, SegmentFileHandle):
        assert seg.physical_path.startswith("s3a://dr-bucket/restore/ckpt/")
        assert seg.logical_file_id == "lfid-1"
    for fm in _strings(new, FileMergingOperatorHandle):
        assert fm.task_owned_dir.startswith("s3a://dr-bucket/") and fm.shared_dir.startswith("s3a://dr-bucket/")
    # relative names untouched, same count of references, same version/trailer/ids/order
    old_refs = extract_references(model, URI)
    new_refs = extract_references(new, "s3://dr-bucket/restore/ckpt/0123456789abcdef0123456789abcdef/chk-7/_metadata")
    assert len(old_refs.files) == len(new_refs.files)
    rel = [f.stored_path for f in new_refs.files if f.handle_kind == "RELATIVE_STREAM_STATE_HANDLE"]
    assert rel == [f.stored_path for f in old_refs.files if f.handle_kind == "RELATIVE_STREAM_STATE_HANDLE"]
    assert new.trailer == model.trailer and new.version == model.version
    assert [o.operator_id for o in new.operators] == [o.operator_id for o in model.operators]
    # the s3a:// alias of the same bucket was matched through normalization
    olds = {c.old for c in res.changes}
    assert f"{OTHER}/shared/sst-b" in olds
    # a stored string occurring in several handles is rewritten everywhere, counted once
    dstl = [c for c in res.changes if c.old == "s3://dstl/job/dstl/f1"]
    assert len(dstl) == 1 and dstl[0].occurrences == 2  # two changelog entries name the same DSTL file
    # writing the rewritten model streams unloaded inline payloads from the original file
    out = to_bytes(new, inline_source=io.BytesIO(data))
    again = read_metadata(io.BytesIO(out), "mem://rewritten")
    assert rewrite_prefixes(again, {"s3a://dr-bucket/restore/ckpt": "s3://bucket/ckpt",
                                    "s3://dr-dstl/job": "s3://dstl/job"}).model.operators is not None


def test_prefix_rewrite_round_trip_restores_bytes_for_canonical_spelling():
    # paths already in canonical spelling come back byte-identical after a there-and-back rewrite
    m = sample_model(5)
    m = rewrite_prefixes(m, {"s3a://bucket/ckpt": "s3://bucket/ckpt"}).model
    data = to_bytes(m)
    there = rewrite_prefixes(read_metadata(io.BytesIO(data), URI, load_inline=True),
                             {"s3://bucket/ckpt": "s3://x/y", "s3://dstl": "s3://d2"}).model
    back = rewrite_prefixes(there, {"s3://x/y": "s3://bucket/ckpt", "s3://d2": "s3://dstl"}).model
    assert to_bytes(back) == data


def test_unmapped_and_segment_boundaries():
    model = sample_model(6)
    res = rewrite_prefixes(model, {"s3://bucket/ck": "s3://elsewhere"})  # not a whole segment
    assert not res.changes
    assert "s3://dstl/job/dstl/f1" in res.unmapped
    assert res.model is model  # nothing changed → the very same object
    res = rewrite_prefixes(model, {"s3://bucket/ckpt/0123456789abcdef0123456789abcdef": "s3://a",
                                   "s3://bucket/ckpt": "s3://b"})
    paths = {fh.path for fh in _strings(res.model, FileHandle)}
    assert "s3://a/shared/sst-a" in paths and "s3://b/ffffffffffffffffffffffffffffffff/shared/sst-b" in paths


def test_bad_mapping():
    with pytest.raises(RewriteError):
        rewrite_prefixes(sample_model(4), {"relative/path": "s3://x"})
    with pytest.raises(RewriteError):
        rewrite_prefixes(sample_model(4), {})


def test_externalize_inline_relative_and_absolute():
    data = to_bytes(sample_model(6))
    model = read_metadata(io.BytesIO(data), URI)
    counter = iter(range(1000))
    res = externalize_inline(model, URI, name_fn=lambda site, role, h: f"ext-{next(counter)}")
    new = res.model
    remaining = _strings(new, ByteStreamHandle)
    # only coordinator state stays inline among ByteStream handles (master/tag-9 are other types)
    assert all(h.name == "0123456789abcdef0123456789abcdef" for h in remaining)
    shared = [f for f in res.files if f.absolute]
    assert shared and all(f.role.endswith("shared") for f in shared)
    assert all(f.uri.startswith(f"{ROOT}/chk-7/ext-") for f in res.files)
    refs = extract_references(new, URI)
    by_name = {f.uri: f for f in refs.files}
    for f in res.files:
        ref = by_name[f.uri]
        assert ref.stated_size == f.payload.length
        assert ref.handle_kind == ("FILE_STREAM_STATE_HANDLE" if f.absolute else "RELATIVE_STREAM_STATE_HANDLE")
        assert f.payload.read(io.BytesIO(data)) == data[f.payload.offset:f.payload.offset + f.payload.length]
    # the new file no longer needs the inline bytes that moved out
    out = to_bytes(new, inline_source=io.BytesIO(data))
    moved = [h for h in _strings(model, ByteStreamHandle) if h.name != "0123456789abcdef0123456789abcdef"]
    assert len(moved) == len(res.files)
    old_cost = sum(1 + 2 + len(h.name) + 4 + h.payload.length for h in moved)
    new_cost = sum(1 + 8 + 2 + len(f.uri) if f.absolute else 1 + 2 + len(f.name) + 8 for f in res.files)
    assert len(out) == len(data) - old_cost + new_cost
    assert read_metadata(io.BytesIO(out), "mem://x").version == 6


def test_externalize_filters_and_version_guard():
    model = sample_model(6)
    res = externalize_inline(model, URI, min_bytes=30)
    assert all(f.payload.length >= 30 for f in res.files) and res.kept_inline > 0
    res = externalize_inline(model, URI, operators=["ffffffffffffffff0000000000000001"])
    assert res.files == [] and res.model is model
    with pytest.raises(RewriteError, match="tag 6 needs V3"):
        externalize_inline(sample_model(2), URI)
    with pytest.raises(RewriteError, match="duplicate"):
        externalize_inline(model, URI, name_fn=lambda *a: "same")
