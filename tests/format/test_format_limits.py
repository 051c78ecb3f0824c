"""Absolute caps on declared counts (format/limits.py): sparse files are refused before the model
grows, real sizes parse, and `limits=` lifts a cap.

Files are real bytes: hand-built V4 files of empty operators (29 bytes each, the smallest record a
count can declare) and writer-built models, parsed from disk.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from statekeeper.format import (
    CheckpointMetadata,
    CorruptMetadataError,
    FileHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    MasterState,
    MetadataFormatError,
    MetadataLimitError,
    MetadataLimits,
    NamedHandle,
    OperatorState,
    RelativeFileHandle,
    SubtaskState,
    open_metadata,
    pack_offsets,
    read_metadata,
    to_bytes,
)
from statekeeper.format.limits import (
    DEFAULT_MAX_OPERATORS,
    DEFAULT_MAX_PARALLELISM,
    FLINK_UPPER_BOUND_MAX_PARALLELISM,
)
from statekeeper.format.model import InlineBytes
from tests.format.support.jos import checkpoint_properties

REPO = Path(__file__).resolve().parents[2]
MAGIC = 0x4960672D
TRAILER = checkpoint_properties("checkpoint")
JOB_ID = "0123456789abcdef0123456789abcdef"


def op_v4(i: int, *, parallelism: int = 1, max_parallelism: int = 1, finished: int = 0) -> bytes:
    """One V4 operator: id, parallelism, max parallelism, null coordinator, finished subtasks."""
    subtasks = b"".join(struct.pack(">i", -k - 1) for k in range(finished))
    return i.to_bytes(16, "big") + struct.pack(">iiBi", parallelism, max_parallelism, 0, finished) + subtasks


def v4_file(ops: list[bytes], *, n_ops: int | None = None, trailer: bytes = TRAILER) -> bytes:
    """Header (no master states), the operators (`n_ops` may declare another count), trailer."""
    head = struct.pack(">IiqiI", MAGIC, 4, 7, 0, len(ops) if n_ops is None else n_ops)
    return head + b"".join(ops) + trailer


def empty_ops(n: int) -> bytes:
    rec = struct.pack(">iiBi", 1, 1, 0, 0)
    return v4_file([i.to_bytes(16, "big") + rec for i in range(n)])


def write(tmp_path: Path, data: bytes, name: str = "chk-7") -> Path:
    path = tmp_path / "checkpoints" / JOB_ID / name / "_metadata"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def v6_model(*, subtasks=(), max_parallelism=128, masters=()) -> CheckpointMetadata:
    op = OperatorState("0123456789abcdef0123456789abcdef", max(len(subtasks), 1), max_parallelism, tuple(subtasks))
    return CheckpointMetadata(version=6, checkpoint_id=7, master_states=tuple(masters), operators=(op,),
                              trailer=TRAILER)


def incremental(shared: int) -> SubtaskState:
    files = tuple(NamedHandle(f"{k:06d}.sst", FileHandle(f"s3://b/ckpt/{JOB_ID}/shared/f{k}", 10))
                  for k in range(shared))
    handle = IncrementalKeyedHandle(11, 7, "backend", 0, 128, 100, RelativeFileHandle("meta", 5), files, (), "id")
    return SubtaskState(0, managed_keyed=handle)


def key_groups(start: int, num: int) -> SubtaskState:
    handle = KeyGroupsHandle(12, start, num, pack_offsets(range(num)), RelativeFileHandle("kg", 1), "id")
    return SubtaskState(0, managed_keyed=handle)


# --------------------------------------------------------------------------- sparse file, memory

_SPAWN = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
_RSS_PROBE = """
import json, resource, sys
from statekeeper.format import MetadataLimitError, read_metadata
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    model = read_metadata(sys.argv[1])
    refused = None
    operators = len(model.operators)
except MetadataLimitError as exc:
    refused = str(exc)
    operators = None
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "refused": refused, "operators": operators}))
"""


def test_million_empty_operators_refused_with_small_peak_rss(tmp_path: Path):
    path = write(tmp_path, empty_ops(1_000_000))
    assert 28_000_000 < path.stat().st_size < 30_000_000  # the sparse 29 MB file of the finding
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'include'}{os.pathsep}{REPO}")
    # Linux carries a process's peak RSS across exec from the RSS of the process it forked from, so
    # the probe is started by a small intermediate python, not by this (large) pytest process.
    res = subprocess.run([sys.executable, "-c", _SPAWN, sys.executable, "-c", _RSS_PROBE, str(path)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    growth_mib = (probe["after_kib"] - probe["before_kib"]) / 1024
    print(f"peak RSS before parse {probe['before_kib'] / 1024:.1f} MiB, after {probe['after_kib'] / 1024:.1f} MiB "
          f"(+{growth_mib:.1f} MiB)")
    assert probe["refused"] is not None, f"parsed {probe['operators']} operators, +{growth_mib:.1f} MiB peak RSS"
    msg = probe["refused"]
    assert str(path) in msg and "byte offset 20" in msg
    assert f"number of operators 1000000 in operator list exceeds the limit of {DEFAULT_MAX_OPERATORS}" in msg
    assert "limits=MetadataLimits(max_operators=" in msg and "report it" in msg
    # The parse is refused at the count: no buffer beyond the first chunk, no model.
    assert growth_mib < 16


# --------------------------------------------------------------------------- relative to file size

def test_count_beyond_remaining_bytes_refused_before_allocation(tmp_path: Path):
    # Counts under every cap, but more than the bytes left could encode: refused as corrupt at the
    # count, before a list is built (peak allocation stays far below one record per declared entry).
    cases = [
        (v4_file([op_v4(0)], n_ops=60_000), 20, "number of operators 60000 needs at least 1740000 bytes"),
        # One finished subtask written, 29999 declared (header 24 + id 16 + 4 + 4 + null coordinator 1).
        (v4_file([bytes(16) + struct.pack(">iiBii", 30_000, 30_000, 0, 29_999, -1)]),
         49, "number of subtask states 29999 needs at least 119996 bytes"),
    ]
    for data, offset, expected in cases:
        path = write(tmp_path, data, f"chk-{offset}")
        tracemalloc.start()
        try:
            with pytest.raises(CorruptMetadataError) as info:
                read_metadata(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert not isinstance(info.value, MetadataLimitError)
        assert info.value.offset == offset and expected in str(info.value)
        assert peak < 1 << 20, peak


# --------------------------------------------------------------------------- exactly at the cap

def test_operators_at_default_cap_parse_and_one_more_is_refused(tmp_path: Path):
    at_cap = read_metadata(write(tmp_path, empty_ops(DEFAULT_MAX_OPERATORS), "chk-1"))
    assert len(at_cap.operators) == DEFAULT_MAX_OPERATORS
    with pytest.raises(MetadataLimitError) as info:
        read_metadata(write(tmp_path, empty_ops(DEFAULT_MAX_OPERATORS + 1), "chk-2"))
    e = info.value
    assert (e.declared, e.limit, e.field, e.offset) == (DEFAULT_MAX_OPERATORS + 1, DEFAULT_MAX_OPERATORS, "max_operators", 20)
    assert isinstance(e, MetadataFormatError)


def test_max_parallelism_is_flinks_upper_bound(tmp_path: Path):
    assert DEFAULT_MAX_PARALLELISM == FLINK_UPPER_BOUND_MAX_PARALLELISM == 32768
    ok = read_metadata(write(tmp_path, v4_file([op_v4(0, parallelism=2, max_parallelism=32768, finished=2)]), "chk-1"))
    assert ok.operators[0].max_parallelism == 32768
    with pytest.raises(MetadataLimitError) as info:
        read_metadata(write(tmp_path, v4_file([op_v4(0, parallelism=2, max_parallelism=32769)]), "chk-2"))
    assert info.value.offset == 24 + 16 + 4 and "max parallelism 32769 in operator #0" in str(info.value)
    assert "UPPER_BOUND_MAX_PARALLELISM" in str(info.value)


def test_key_group_range_ends_at_most_at_the_upper_bound(tmp_path: Path):
    model = read_metadata(write(tmp_path, to_bytes(v6_model(subtasks=[key_groups(32767, 1)], max_parallelism=32768)), "chk-1"))
    assert model.operators[0].subtasks[0].managed_keyed.key_group_start == 32767
    with pytest.raises(MetadataLimitError) as info:
        read_metadata(write(tmp_path, to_bytes(v6_model(subtasks=[key_groups(32767, 2)], max_parallelism=32768)), "chk-2"))
    assert info.value.declared == 32769 and info.value.field == "max_parallelism"
    assert "subtask 0" in str(info.value)


@pytest.mark.parametrize("field, at_cap, above", [
    ("max_handles_per_list",
     lambda: to_bytes(v6_model(subtasks=[incremental(5)])), lambda: to_bytes(v6_model(subtasks=[incremental(6)]))),
    ("max_master_states",
     lambda: to_bytes(v6_model(masters=[MasterState(f"h{k}", 1, InlineBytes.of(b"x")) for k in range(5)])),
     lambda: to_bytes(v6_model(masters=[MasterState(f"h{k}", 1, InlineBytes.of(b"x")) for k in range(6)]))),
    ("max_subtask_states",
     lambda: v4_file([op_v4(0, parallelism=3, max_parallelism=3, finished=3), op_v4(1, parallelism=2, max_parallelism=2, finished=2)]),
     lambda: v4_file([op_v4(0, parallelism=3, max_parallelism=3, finished=3), op_v4(1, parallelism=3, max_parallelism=3, finished=3)])),
    # 2 operators + 3 subtasks = 5 entries
    ("max_entries",
     lambda: v4_file([op_v4(0, parallelism=3, max_parallelism=3, finished=3), op_v4(1)]),
     lambda: v4_file([op_v4(0, parallelism=3, max_parallelism=3, finished=3), op_v4(1, finished=1)])),
])
def test_lowered_cap_is_exact(tmp_path: Path, field, at_cap, above):
    limits = MetadataLimits(**{field: 5})
    read_metadata(write(tmp_path, at_cap(), "chk-1"), limits=limits)
    with pytest.raises(MetadataLimitError) as info:
        read_metadata(write(tmp_path, above(), "chk-2"), limits=limits)
    assert info.value.field == field and info.value.limit == 5 and info.value.declared == 6
    assert f"MetadataLimits.{field}" in str(info.value)


# --------------------------------------------------------------------------- override

def test_override_lifts_the_cap(tmp_path: Path):
    path = write(tmp_path, empty_ops(DEFAULT_MAX_OPERATORS + 1))
    with pytest.raises(MetadataLimitError):
        open_metadata(path.parent)
    lifted = MetadataLimits(max_operators=DEFAULT_MAX_OPERATORS + 1)
    assert len(open_metadata(path.parent, limits=lifted).operators) == DEFAULT_MAX_OPERATORS + 1
    assert len(read_metadata(path, limits=lifted).operators) == DEFAULT_MAX_OPERATORS + 1

    wide = write(tmp_path, v4_file([op_v4(0, parallelism=1, max_parallelism=1 << 16)]), "chk-8")
    assert read_metadata(wide, limits=MetadataLimits(max_parallelism=1 << 16)).operators[0].max_parallelism == 1 << 16
    with pytest.raises(ValueError, match="max_operators"):
        MetadataLimits(max_operators=-1)


# --------------------------------------------------------------------------- callers fail closed

def test_inspect_exits_3_with_the_limit_message(tmp_path: Path):
    path = write(tmp_path, empty_ops(DEFAULT_MAX_OPERATORS + 1))
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'include'}{os.pathsep}{REPO}")
    res = subprocess.run([sys.executable, "-m", "statekeeper.cli", "inspect", str(path.parent)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 3, res.stderr
    assert str(path) in res.stderr and "byte offset 20" in res.stderr
    assert f"number of operators {DEFAULT_MAX_OPERATORS + 1}" in res.stderr and "MetadataLimits.max_operators" in res.stderr


def test_index_records_a_parse_error_row(tmp_path: Path):
    from statekeeper.index.parse import RootIndex, parse_snapshot
    from statekeeper.storage import LocalFileIO, Roots
    from statekeeper.tables.vocabulary import SnapshotStatus
    from statekeeper.uri import normalize_uri

    path = write(tmp_path, empty_ops(DEFAULT_MAX_OPERATORS + 1))
    roots = RootIndex(list(Roots([str(tmp_path / "checkpoints")])))
    fio = LocalFileIO()
    uri = normalize_uri(str(path))
    root, location = roots.locate(uri)
    parsed = parse_snapshot(fio, fio.stat(uri), root, JOB_ID, location, "run-1", roots)
    row = parsed.snapshot
    assert row["status"] == SnapshotStatus.PARSE_ERROR and parsed.references == []
    assert row["error"].startswith("MetadataLimitError: ") and "MetadataLimits.max_operators" in row["error"]
