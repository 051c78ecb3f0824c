"""Codec tests on hand-built models: every record kind of every version round-trips exactly, and
the error paths name object, offset and cause. (Real-Flink files: test_format_harness.py.)"""
from __future__ import annotations

import io
import struct

import pytest

from statekeeper.errors import StatekeeperError
from statekeeper.format import (
    CorruptMetadataError,
    FileHandle,
    MetadataFormatError,
    MetadataWriteError,
    NotFlinkMetadataError,
    RelativeFileHandle,
    TrailingBytesError,
    TruncatedMetadataError,
    UnknownHandleTagError,
    UnknownMetadataVersionError,
    UnsupportedMetadataVersionError,
    account,
    extract_references,
    read_metadata,
    to_bytes,
)
from statekeeper.format.mutf8 import MUTF8Error, decode, encode
from tests.format.support.jos import NULL_TRAILER, checkpoint_properties
from tests.format.support.samples import sample_model

URI = "s3://bucket/ckpt/0123456789abcdef0123456789abcdef/chk-7/_metadata"
VERSIONS = (2, 3, 4, 5, 6)


def parse(data: bytes, **kw):
    return read_metadata(io.BytesIO(data), URI, **kw)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_record_kind_round_trips_byte_identical(version):
    model = sample_model(version, file_merging=version >= 4)
    data = to_bytes(model)
    loaded = parse(data, load_inline=True)
    assert to_bytes(loaded) == data
    lazy = parse(data)
    assert to_bytes(lazy, inline_source=io.BytesIO(data)) == data
    assert lazy.version == version and lazy.checkpoint_id == 7
    assert [op.operator_id for op in lazy.operators] == [op.operator_id for op in model.operators]
    assert lazy.operators[0].name == model.operators[0].name
    assert lazy.total_size == len(data)


@pytest.mark.parametrize("version", VERSIONS)
def test_lazy_payloads_are_windows_into_the_file(version):
    data = to_bytes(sample_model(version))
    lazy = parse(data)
    ms = lazy.master_states[0]
    assert ms.payload.data is None
    assert data[ms.payload.offset : ms.payload.offset + ms.payload.length] == b"master-bytes"
    assert ms.payload.read(io.BytesIO(data)) == b"master-bytes"
    assert b"".join(ms.payload.iter_chunks(io.BytesIO(data), chunk=5)) == b"master-bytes"
    with pytest.raises(MetadataWriteError, match="not loaded"):
        to_bytes(lazy)


def test_unicode_names_survive():
    data = to_bytes(sample_model(6))
    m = parse(data)
    assert m.operators[1].name == "Sink \u4e2d\U0001F600"
    states = m.operators[0].subtasks[0].managed_operator.states
    assert states[1].name == "union-\u00e9\x00"
    assert states[0].offsets == (0, 8, 16) and states[0].mode_name == "SPLIT_DISTRIBUTE"


def test_finished_subtasks_and_fully_finished_operators():
    m = parse(to_bytes(sample_model(5)))
    op = m.operators[0]
    assert [s.index for s in op.subtasks if s.finished] == [2]
    assert m.operators[2].fully_finished and m.operators[2].subtasks == ()


@pytest.mark.parametrize("kind,fmt,sharing", [
    ("checkpoint", None, "FORWARD_BACKWARD"), ("checkpoint", None, "FORWARD"),
    ("savepoint", "NATIVE", "NO_SHARING"), ("savepoint", "CANONICAL", "NO_SHARING"),
])
def test_trailer_properties(kind, fmt, sharing):
    from dataclasses import replace

    trailer = checkpoint_properties(kind, fmt or "CANONICAL", sharing)
    data = to_bytes(replace(sample_model(4), trailer=trailer))
    p = parse(data).properties
    assert (p.snapshot_type, p.format, p.sharing) == (kind, fmt, sharing)


def test_trailer_cache_answers_like_a_cold_decode():
    """Trailers are decoded once per distinct byte string: a cached answer equals a cold decode, and
    a damaged trailer still fails after intact ones were cached."""
    from dataclasses import replace

    import statekeeper.format.reader as reader

    trailer = checkpoint_properties("savepoint", "NATIVE", "NO_SHARING")
    data = to_bytes(replace(sample_model(5), trailer=trailer))
    reader._TRAILERS.clear()
    cold = parse(data).properties
    assert trailer in reader._TRAILERS
    assert parse(data).properties == cold and cold.format == "NATIVE"
    damaged = data[:-len(trailer)] + b"\x00" + trailer[1:]  # same length, magic broken
    with pytest.raises(CorruptMetadataError, match="not a valid Java-serialized CheckpointProperties"):
        parse(damaged)
    assert parse(data).properties == cold


def test_null_trailer():
    from dataclasses import replace

    data = to_bytes(replace(sample_model(6), trailer=NULL_TRAILER))
    m = parse(data)
    assert m.properties is None and m.trailer == NULL_TRAILER


def test_references_and_accounting_of_sample():
    m = parse(to_bytes(sample_model(6)))
    refs = extract_references(m, URI)
    kg = [f for f in refs.files if f.stored_path == "kg-file"]
    assert kg and kg[0].uri.endswith("/chk-7/kg-file") and kg[0].scope == "exclusive"
    by_path = {f.stored_path: f for f in refs.files}
    assert by_path["chan"].handle_kind == "RELATIVE_STREAM_STATE_HANDLE"
    other = by_path["s3a://bucket/ckpt/ffffffffffffffffffffffffffffffff/shared/sst-b"]
    assert other.uri == "s3://bucket/ckpt/ffffffffffffffffffffffffffffffff/shared/sst-b"
    assert other.scope == "shared" and other.local_name == "000011.sst" and other.role == "shared"
    seg = [f for f in refs.files if f.handle_kind == "SEGMENT_FILE_HANDLE"][0]
    assert (seg.segment_start, seg.segment_length, seg.scope) == (10, 20, "task_owned")
    dirs = refs.managed_dirs()
    assert len(dirs) == 2 and all("/taskowned/" in d or "/shared/" in d for d in dirs)
    # segments → physical size is the end of the segment
    assert refs.physical_files()[seg.uri] == 30
    acc = account(m)
    assert acc.inline_bytes == refs.inline_bytes == m.inline_bytes
    assert acc.coordinator_bytes == 15 and acc.master_bytes == 12 and acc.changelog_bytes == 3
    assert acc.channel_blob_bytes > 0
    coord = [s for s in refs.inline if s.slot == "coordinator"]
    assert coord and coord[0].subtask is None and coord[0].inline_bytes == 15


# ----------------------------------------------------------------------------- failures


def test_bad_magic():
    with pytest.raises(NotFlinkMetadataError, match=r"s3://bucket.*offset 0.*magic"):
        parse(b"\x00\x01\x02\x03" + b"\x00" * 20)


@pytest.mark.parametrize("version", [0, 1, 7, 99, -1])
def test_unsupported_versions(version):
    data = struct.pack(">ii", 0x4960672D, version) + b"\x00" * 16
    with pytest.raises(UnsupportedMetadataVersionError, match=f"unsupported metadata version {version}") as info:
        parse(data)
    assert info.value.version == version and info.value.offset == 4
    # Version 1 is obsolete; every other version this codec does not read is refused by name, with what to do.
    assert isinstance(info.value, UnknownMetadataVersionError) is (version != 1)
    if version == 7:
        assert "FLIP-600" in str(info.value) and "older chk-M/" in str(info.value)
    if version != 1:
        assert "Upgrade Statekeeper" in str(info.value) and "GC stays blocked" in str(info.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_fails_closed(version):
    data = to_bytes(sample_model(version))
    for cut in range(0, len(data)):
        with pytest.raises(MetadataFormatError) as info:
            parse(data[:cut])
        assert URI in str(info.value)
        assert isinstance(info.value, StatekeeperError)


@pytest.mark.parametrize("version", [2, 3])
def test_trailing_garbage_v2_v3(version):
    data = to_bytes(sample_model(version))
    with pytest.raises(TrailingBytesError, match="1 bytes of trailing garbage"):
        parse(data + b"\x00")


def test_unknown_tag_is_named():
    from dataclasses import replace
    from statekeeper.format import OperatorState, SubtaskState

    m = replace(sample_model(3), master_states=(), operators=(
        OperatorState("0" * 32, 1, 1, (SubtaskState(0, managed_keyed=None),)),
    ))
    data = bytearray(to_bytes(m))
    # managed keyed tag position: header 8+8+4+4, op id 16, par 8, coord tag 1, nsub 4, idx 4, 2 flags 8
    pos = 8 + 8 + 4 + 4 + 16 + 8 + 1 + 4 + 4 + 8
    assert data[pos] == 0
    data[pos] = 42
    with pytest.raises(UnknownHandleTagError, match=rf"offset {pos}:.*tag 42.*subtask 0"):
        parse(bytes(data))
    data[pos] = 4  # operator tag in a keyed position
    with pytest.raises(CorruptMetadataError, match="tag 4 .* not valid in keyed-state position"):
        parse(bytes(data))


def test_huge_count_is_rejected_before_allocating():
    from dataclasses import replace

    data = bytearray(to_bytes(replace(sample_model(3), master_states=(), operators=())))
    struct.pack_into(">i", data, 20, 0x7FFFFFFF)  # number of operators
    with pytest.raises(CorruptMetadataError, match="number of operators 2147483647 needs at least"):
        parse(bytes(data))
    struct.pack_into(">i", data, 20, -5)
    with pytest.raises(CorruptMetadataError, match="negative number of operators -5"):
        parse(bytes(data))


def test_huge_inline_length_is_rejected():
    from dataclasses import replace
    from statekeeper.format import ByteStreamHandle, InlineBytes, OperatorState

    m = replace(sample_model(3), master_states=(), operators=(
        OperatorState("0" * 32, 1, 1, (), coordinator=ByteStreamHandle("n", InlineBytes.of(b"abc"))),
    ))
    data = bytearray(to_bytes(m))
    pos = data.index(b"\x01\x00\x01n") + 4
    struct.pack_into(">i", data, pos, 1 << 30)
    with pytest.raises(TruncatedMetadataError, match="claims 1073741824 bytes"):
        parse(bytes(data))


def test_mutf8_strictness():
    for s in ["", "plain", "nul\x00", "\u00e9\u4e2d", "\U0001F600", "\udc00lone"]:
        assert decode(encode(s)) == s
    for bad in [b"a\x00", b"\xc1\x81", b"\xf0\x9f\x98\x80", b"\xe4\xb8", b"\x80"]:
        with pytest.raises(MUTF8Error):
            decode(bad)


def test_writer_refuses_what_the_version_cannot_hold():
    from dataclasses import replace

    v4 = sample_model(4)
    with pytest.raises(MetadataWriteError, match="names/uids need metadata version 5"):
        to_bytes(replace(v4, operators=(replace(v4.operators[0], name="x"),)))
    with pytest.raises(MetadataWriteError, match="needs its CheckpointProperties trailer"):
        to_bytes(replace(v4, trailer=None))
    v5 = sample_model(6)
    with pytest.raises(MetadataWriteError, match="merged channel state needs metadata version 6"):
        to_bytes(replace(v5, version=5))
    v2 = sample_model(2)
    with pytest.raises(MetadataWriteError):
        to_bytes(replace(v2, operators=(replace(sample_model(3).operators[0], v2_chain_length=1),)))


def test_tags_newer_than_the_version_are_refused_both_ways():
    from dataclasses import replace
    from statekeeper.format import OperatorState, SubtaskState

    # V3 (Flink 1.11-1.15) cannot hold tag 13 (1.16+): written by hand, the reader refuses it
    v4 = sample_model(4)
    assert any(isinstance(s.managed_keyed, type(sample_model(4).operators[0].subtasks[1].managed_keyed))
               for s in v4.operators[0].subtasks)
    data = bytearray(to_bytes(replace(v4, version=4)))
    data[7] = 3  # relabel the V4 file as V3 ...
    data = bytes(data[: len(data) - len(v4.trailer)])  # ... without its trailer
    with pytest.raises(CorruptMetadataError, match=r"tag (13|14|15|17) .* cannot appear in a V3 file"):
        parse(data)
    # and the writer refuses to produce it
    with pytest.raises(MetadataWriteError, match="cannot be written into a V3 file"):
        to_bytes(replace(v4, version=3, trailer=None))
    # tag 6 (relative, 1.11+) cannot be in a V2 file
    v2 = replace(sample_model(2), master_states=(), operators=(
        OperatorState("0" * 32, 1, 1, (SubtaskState(0, managed_keyed=sample_model(3).operators[0].subtasks[0].raw_keyed),),
                      v2_chain_length=1),))
    with pytest.raises(MetadataWriteError, match="tag 12 .* V2 file"):
        to_bytes(v2)


def test_codec_imports_no_spark_airflow_or_boto():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, statekeeper.format, statekeeper.inspect.metadata\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'airflow', 'boto3', 'botocore', 'deltalake', 'statekeeper.storage'))\n"
        "bad += [m for m in sys.modules if m.startswith('statekeeper.storage')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    include = Path(__file__).resolve().parents[2] / "include"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(include), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stdout + res.stderr
