"""Hand-built models that exercise every record kind a version can hold."""
from __future__ import annotations

from statekeeper.format import (
    EMPTY_SEGMENT,
    ByteStreamHandle,
    ChangelogEntry,
    ChangelogFileHandle,
    ChangelogHandle,
    ChannelStateHandle,
    CheckpointMetadata,
    FileHandle,
    FileMergingOperatorHandle,
    IncrementalKeyedHandle,
    InlineBytes,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
    MasterState,
    MergedChannelEntry,
    MergedChannelStateHandle,
    NamedHandle,
    OperatorState,
    OperatorStateMeta,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StateChange,
    SubtaskState,
    pack_offsets,
)
from statekeeper.format.channel_blob import encode_merged_blob

from .jos import checkpoint_properties

ROOT = "s3://bucket/ckpt/0123456789abcdef0123456789abcdef"
OTHER = "s3a://bucket/ckpt/ffffffffffffffffffffffffffffffff"


def ib(data: bytes) -> InlineBytes:
    return InlineBytes.of(data)


def _kg(tag, n=4, delegate=None, hid="kg-id", v=6):
    if delegate is None:
        delegate = RelativeFileHandle("kg-file", 123) if v >= 3 else FileHandle(f"{ROOT}/chk-7/kg-file", 123)
    return KeyGroupsHandle(tag, 0, n, pack_offsets(range(0, 10 * n, 10)), delegate,
                           hid if tag == 12 else None)


def _incremental(tag=11, v=6):
    return IncrementalKeyedHandle(
        tag, 7, "5a0e1c36-9d4f-4d5e-8a07-3c8c9a1b2c3d", 0, 128, 4096 if tag == 11 else None,
        ByteStreamHandle(f"{ROOT}/chk-7/meta-uuid", ib(b"meta" * 10)),
        (NamedHandle("000010.sst", FileHandle(f"{ROOT}/shared/sst-a", 2048)),
         NamedHandle("000011.sst", FileHandle(f"{OTHER}/shared/sst-b", 1024)),
         NamedHandle("000012.sst", ByteStreamHandle(f"{ROOT}/shared/small", ib(b"s" * 33)))),
        (NamedHandle("MANIFEST-000005", FileHandle(f"{ROOT}/shared/manifest", 77)),
         NamedHandle("CURRENT", RelativeFileHandle("current-uuid", 16) if v >= 3 else FileHandle(f"{ROOT}/chk-7/current", 16)),
         NamedHandle("OPTIONS-000007", ByteStreamHandle(f"{ROOT}/chk-7/opts", ib(b"o" * 5)))),
        "inc-id" if tag == 11 else None,
    )


def _changelog(tag=14, v=6):
    return ChangelogHandle(
        tag, 0, 128, 999,
        (_incremental(11), None, _kg(12)),
        (InMemoryChangelogHandle(0, 128, 1, 5, (StateChange(3, ib(b"chg")), StateChange(-1, ib(b""))), "mem-id"),
         ChangelogFileHandle(13 if v >= 4 else 10, 0, 128, (ChangelogEntry(0, FileHandle("s3://dstl/job/dstl/f1", 500)),
                                          ChangelogEntry(250, FileHandle("s3://dstl/job/dstl/f1", 500))),
                             500, 400, "dstl-id", "filesystem" if v >= 4 else None),
         ChangelogFileHandle(10, 0, 128, (ChangelogEntry(8, FileHandle("s3://dstl/job/dstl/f2", 50)),),
                             50, 40, "dstl-id2", None)),
        3, 7 if tag == 14 else None, "cl-id",
    )


def _opstate(fm=False):
    states = (OperatorStateMeta("list", 0, pack_offsets([0, 8, 16])),
              OperatorStateMeta("union-\u00e9\x00", 1, pack_offsets([])),
              OperatorStateMeta("bcast", 2, pack_offsets([99])))
    if fm:
        return FileMergingOperatorHandle(
            states, f"{ROOT}/taskowned/job_x_tm_y", f"{ROOT}/shared/job_x_op_z_0_2", False,
            SegmentFileHandle(10, 20, 0, f"{ROOT}/taskowned/job_x_tm_y/phys-1", "lfid-1"))
    return OperatorStreamHandle(states, ByteStreamHandle(f"{ROOT}/chk-7/op", ib(b"operator-state")))


def sample_model(version: int, *, file_merging: bool = True) -> CheckpointMetadata:
    v = version
    file_merging = file_merging and v >= 4  # tags 15-17 exist since 1.20 (V4)
    subs = [
        SubtaskState(
            0, managed_operator=_opstate(),
            raw_operator=_opstate(fm=file_merging) if v >= 3 else None,
            managed_keyed=_incremental(11 if v >= 3 else 5, v=v),
            raw_keyed=_kg(12 if v >= 3 else 3, delegate=KeyGroupsHandle(3, 0, 2, pack_offsets([1, 2]), FileHandle(f"{ROOT}/chk-7/nested", 5)))
            if v >= 3 else _kg(3, v=v),
            v2_duration=-1 if v == 2 else None,
        ),
        SubtaskState(1, managed_keyed=_changelog(14 if v >= 4 else 8, v=v) if v >= 3 else _kg(3, v=v)),
    ]
    if v >= 3:
        subs.append(SubtaskState(2, finished=True))
        chans_in = [ChannelStateHandle(False, 3, (0, 1), pack_offsets([0, 100]), 200, RelativeFileHandle("chan", 200)),
                    ChannelStateHandle(False, 3, (0, 2), pack_offsets([]), 0, ByteStreamHandle("uuid-c", ib(b"cc")))]
        chans_out = [ChannelStateHandle(True, 3, (1, 0), pack_offsets([5]), 10, EMPTY_SEGMENT if file_merging else None)]
        if v >= 6:
            blob = encode_merged_blob([MergedChannelEntry((0, 3), 40, (0, 20)), MergedChannelEntry((0, 4), 4, ())])
            chans_in.append(MergedChannelStateHandle(False, 3, 44, RelativeFileHandle("merged-chan", 44), ib(blob)))
            chans_out.append(MergedChannelStateHandle(True, 3, 9, FileHandle(f"{ROOT}/chk-7/mo", 9), ib(encode_merged_blob([MergedChannelEntry((2, 2), 9, (0,))]))))
        subs.append(SubtaskState(3, input_channels=tuple(chans_in), output_channels=tuple(chans_out),
                                 managed_keyed=_kg(12, n=0, delegate=None) if False else None))
    ops = [
        OperatorState(
            "0123456789abcdef0123456789abcdef", 4, 128, tuple(subs),
            coordinator=ByteStreamHandle("0123456789abcdef0123456789abcdef", ib(b"coord" * 3)) if v >= 3 else None,
            name="Source: numbers" if v >= 5 else None, uid="src-uid" if v >= 5 else None,
            v2_chain_length=1 if v == 2 else None,
        ),
        OperatorState("ffffffffffffffff0000000000000001", 2, 2, (), name="Sink \u4e2d\U0001F600" if v >= 5 else None),
    ]
    if v >= 3:
        ops.append(OperatorState("00000000000000000000000000000002", 1, 1, fully_finished=True))
    trailer = checkpoint_properties("checkpoint") if v >= 4 else None
    return CheckpointMetadata(
        version=v, checkpoint_id=7,
        master_states=(MasterState("hook-a", 1, ib(b"master-bytes")), MasterState("", 0, ib(b""))),
        operators=tuple(ops), trailer=trailer,
        properties=None,
    )
