"""The records of a Flink `_metadata` file (spec §3-§4): state handles, subtask and operator state, master
state, checkpoint properties. `statekeeper.format.model` adds the file itself (CheckpointMetadata).

Every field needed to re-serialize the file byte-for-byte is kept, including fields Flink ignores
(V2 chain length and duration), because a maintenance tool must never change what it does not
mean to change. Inline payloads are `InlineBytes`: an (offset, length) window into the source,
loaded only on request, so a multi-GB file is modelled in bounded memory.

IDs are 32-character lower-case hex strings, exactly as Flink prints OperatorID (spec §2).
Offsets arrays (key-group offsets, operator-state partition offsets, channel offsets) are kept as
the raw big-endian bytes of the file (`offsets_be`) and decoded on access via `.offsets`: they are
never needed for references, and keeping bytes keeps parsing lean and memory proportional.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Optional, Union

from . import tags as T
from .channel_blob import MergedChannelEntry, decode_merged_blob
from .source import COPY_CHUNK, iter_range, opened, read_exact


def pack_offsets(values) -> bytes:
    """Encode a sequence of i64 offsets the way they are stored (big-endian)."""
    values = tuple(values)
    return struct.pack(f">{len(values)}q", *values)


def _unpack_offsets(raw: bytes) -> tuple[int, ...]:
    return struct.unpack(f">{len(raw) // 8}q", raw)


@dataclass(frozen=True, slots=True)
class InlineBytes:
    """Bytes stored inside `_metadata`: a window of the source, optionally loaded."""

    offset: int  # absolute offset of the first payload byte in the source; -1 if built in memory
    length: int
    data: Optional[bytes] = None

    @classmethod
    def of(cls, data: bytes) -> "InlineBytes":
        return cls(-1, len(data), bytes(data))

    @property
    def loaded(self) -> bool:
        return self.data is not None

    def read(self, source: Any = None) -> bytes:
        """The payload; reads it from `source` (path or ByteSource) when not loaded."""
        if self.data is not None:
            return self.data
        if source is None or self.offset < 0:
            raise ValueError("inline payload is not loaded; pass the source it was parsed from")
        with opened(source) as src:
            return read_exact(src, self.offset, self.length)

    def iter_chunks(self, source: Any = None, chunk: int = COPY_CHUNK) -> Iterator[bytes]:
        """Stream the payload in bounded chunks (from memory or from `source`)."""
        if self.data is not None:
            for i in range(0, self.length, chunk):
                yield self.data[i : i + chunk]
            return
        if source is None or self.offset < 0:
            raise ValueError("inline payload is not loaded; pass the source it was parsed from")
        with opened(source) as src:
            yield from iter_range(src, self.offset, self.length, chunk)


# --------------------------------------------------------------------------- stream handles


@dataclass(frozen=True, slots=True)
class ByteStreamHandle:
    """Tag 1: state inlined in `_metadata`. `name` looks like a path but names no file."""

    TAG: ClassVar[int] = T.BYTE_STREAM_STATE_HANDLE
    name: str
    payload: InlineBytes

    @property
    def kind(self) -> str:
        return "BYTE_STREAM_STATE_HANDLE"


@dataclass(frozen=True, slots=True)
class FileHandle:
    """Tag 2: one file by absolute path."""

    TAG: ClassVar[int] = T.FILE_STREAM_STATE_HANDLE
    path: str
    size: int

    @property
    def kind(self) -> str:
        return "FILE_STREAM_STATE_HANDLE"


@dataclass(frozen=True, slots=True)
class RelativeFileHandle:
    """Tag 6: one file beside `_metadata`, by name."""

    TAG: ClassVar[int] = T.RELATIVE_STREAM_STATE_HANDLE
    relative_path: str
    size: int

    @property
    def kind(self) -> str:
        return "RELATIVE_STREAM_STATE_HANDLE"


@dataclass(frozen=True, slots=True)
class SegmentFileHandle:
    """Tag 15: the byte range [start_pos, start_pos + size) of a merged physical file."""

    TAG: ClassVar[int] = T.SEGMENT_FILE_HANDLE
    start_pos: int
    size: int
    scope: int  # 0 EXCLUSIVE, 1 SHARED (CheckpointedStateScope ordinal)
    physical_path: str
    logical_file_id: str

    @property
    def kind(self) -> str:
        return "SEGMENT_FILE_HANDLE"

    @property
    def scope_name(self) -> str:
        return ("EXCLUSIVE", "SHARED")[self.scope]


@dataclass(frozen=True, slots=True)
class EmptySegmentFileHandle:
    """Tag 16: the empty-segment singleton. References nothing."""

    TAG: ClassVar[int] = T.EMPTY_SEGMENT_FILE_HANDLE

    @property
    def kind(self) -> str:
        return "EMPTY_SEGMENT_FILE_HANDLE"


EMPTY_SEGMENT = EmptySegmentFileHandle()


@dataclass(frozen=True, slots=True)
class KeyGroupsHandle:
    """Tags 3 (v1, also nested in stream position), 7 (canonical savepoint), 12 (v2, with id)."""

    tag: int
    key_group_start: int
    num_key_groups: int
    offsets_be: bytes  # num_key_groups big-endian i64 offsets into the delegate stream
    delegate: Optional["StreamHandle"]
    handle_id: Optional[str] = None  # tag 12 only

    @property
    def kind(self) -> str:
        return T.tag_name(self.tag)

    @property
    def offsets(self) -> tuple[int, ...]:
        return _unpack_offsets(self.offsets_be)


StreamHandle = Union[
    ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle,
    KeyGroupsHandle,
]

# --------------------------------------------------------------------------- keyed handles


@dataclass(frozen=True, slots=True)
class NamedHandle:
    """An entry of an incremental handle's SharedList/PrivateList: RocksDB/ForSt file name → handle."""

    local_name: str
    handle: Optional[StreamHandle]


@dataclass(frozen=True, slots=True)
class IncrementalKeyedHandle:
    """Tags 5 and 11: RocksDB/ForSt incremental (or native) snapshot of one backend instance."""

    tag: int
    checkpoint_id: int
    backend_id: str
    key_group_start: int
    num_key_groups: int
    checkpointed_size: Optional[int]  # tag 11 only
    meta: Optional[StreamHandle]
    shared: tuple[NamedHandle, ...]
    private: tuple[NamedHandle, ...]
    handle_id: Optional[str]  # tag 11 only

    @property
    def kind(self) -> str:
        return T.tag_name(self.tag)


@dataclass(frozen=True, slots=True)
class StateChange:
    """One in-memory changelog change (tag 9). key_group -1 marks a metadata change."""

    key_group: int
    payload: InlineBytes


@dataclass(frozen=True, slots=True)
class InMemoryChangelogHandle:
    """Tag 9: changelog deltas kept inline (state.changelog.storage = memory)."""

    TAG: ClassVar[int] = T.CHANGELOG_BYTE_INCREMENT_HANDLE
    key_group_start: int
    num_key_groups: int
    sequence_from: int
    sequence_to: int
    changes: tuple[StateChange, ...]
    handle_id: str

    @property
    def kind(self) -> str:
        return "CHANGELOG_BYTE_INCREMENT_HANDLE"


@dataclass(frozen=True, slots=True)
class ChangelogEntry:
    offset: int
    handle: Optional[StreamHandle]


@dataclass(frozen=True, slots=True)
class ChangelogFileHandle:
    """Tags 10 and 13: changelog deltas in DSTL files (handles at offsets)."""

    tag: int
    key_group_start: int
    num_key_groups: int
    entries: tuple[ChangelogEntry, ...]
    state_size: int
    checkpointed_size: int
    handle_id: str
    storage_identifier: Optional[str]  # tag 13 only

    @property
    def kind(self) -> str:
        return T.tag_name(self.tag)


@dataclass(frozen=True, slots=True)
class ChangelogHandle:
    """Tags 8 and 14: changelog state backend = materialized part + deltas."""

    tag: int
    key_group_start: int
    num_key_groups: int
    checkpointed_size: int
    materialized: tuple[Optional["KeyedHandle"], ...]
    deltas: tuple[Optional["KeyedHandle"], ...]
    materialization_id: int
    checkpoint_id: Optional[int]  # tag 14 only
    handle_id: str

    @property
    def kind(self) -> str:
        return T.tag_name(self.tag)


KeyedHandle = Union[
    KeyGroupsHandle, IncrementalKeyedHandle, ChangelogHandle, InMemoryChangelogHandle,
    ChangelogFileHandle,
]

# --------------------------------------------------------------------------- operator handles

DISTRIBUTION_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


@dataclass(frozen=True, slots=True)
class OperatorStateMeta:
    name: str
    mode: int  # OperatorStateHandle.Mode ordinal
    offsets_be: bytes

    @property
    def mode_name(self) -> str:
        return DISTRIBUTION_MODES[self.mode]

    @property
    def offsets(self) -> tuple[int, ...]:
        return _unpack_offsets(self.offsets_be)


@dataclass(frozen=True, slots=True)
class OperatorStreamHandle:
    """Tag 4: partitionable operator state in one stream."""

    TAG: ClassVar[int] = T.PARTITIONABLE_OPERATOR_STATE_HANDLE
    states: tuple[OperatorStateMeta, ...]
    delegate: Optional[StreamHandle]

    @property
    def kind(self) -> str:
        return "PARTITIONABLE_OPERATOR_STATE_HANDLE"


@dataclass(frozen=True, slots=True)
class FileMergingOperatorHandle:
    """Tag 17: operator state in a segment, plus the two managed directories (absolute)."""

    TAG: ClassVar[int] = T.SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE
    states: tuple[OperatorStateMeta, ...]
    task_owned_dir: str
    shared_dir: str
    is_empty: bool
    delegate: Optional[StreamHandle]

    @property
    def kind(self) -> str:
        return "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE"


OperatorHandle = Union[OperatorStreamHandle, FileMergingOperatorHandle]

# --------------------------------------------------------------------------- channel state


@dataclass(frozen=True, slots=True)
class ChannelStateHandle:
    """Unaligned-checkpoint state of one input channel / result subpartition.

    `info` is (gateIdx, channelIdx) for input, (partitionIdx, subpartitionIdx) for output.
    """

    output: bool
    subtask_index: int
    info: tuple[int, int]
    offsets_be: bytes
    state_size: int
    delegate: Optional[StreamHandle]

    @property
    def kind(self) -> str:
        return T.CHANNEL_TYPE_NAMES[T.CHANNEL_OUTPUT if self.output else T.CHANNEL_INPUT]

    @property
    def offsets(self) -> tuple[int, ...]:
        return _unpack_offsets(self.offsets_be)


@dataclass(frozen=True, slots=True)
class MergedChannelStateHandle:
    """V6 types 3/4: all channels of one subtask sharing one delegate; per-channel data in `blob`."""

    output: bool
    subtask_index: int
    state_size: int
    delegate: Optional[StreamHandle]
    blob: InlineBytes

    @property
    def kind(self) -> str:
        return T.CHANNEL_TYPE_NAMES[
            T.CHANNEL_MERGED_OUTPUT if self.output else T.CHANNEL_MERGED_INPUT
        ]

    def entries(self, source: Any = None) -> tuple[MergedChannelEntry, ...]:
        return decode_merged_blob(self.blob.read(source))


AnyChannelHandle = Union[ChannelStateHandle, MergedChannelStateHandle]

# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class SubtaskState:
    """One subtask of an operator. A finished subtask (V3+) has no handles at all."""

    index: int
    finished: bool = False
    managed_operator: Optional[OperatorHandle] = None
    raw_operator: Optional[OperatorHandle] = None
    managed_keyed: Optional[KeyedHandle] = None
    raw_keyed: Optional[KeyedHandle] = None
    input_channels: tuple[AnyChannelHandle, ...] = ()
    output_channels: tuple[AnyChannelHandle, ...] = ()
    v2_duration: Optional[int] = None  # V2 only: the unused "duration" long, kept for round trip


@dataclass(frozen=True, slots=True)
class OperatorState:
    operator_id: str  # 32 hex chars, as Flink prints it
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskState, ...] = ()
    coordinator: Optional[ByteStreamHandle] = None  # V3+, always inline
    fully_finished: bool = False  # V3+: written as subtask count -1
    name: Optional[str] = None  # V5+: "" in the file means absent
    uid: Optional[str] = None  # V5+
    v2_chain_length: Optional[int] = None  # V2 only: the unused "chain length" int


@dataclass(frozen=True, slots=True)
class MasterState:
    """State of a master trigger hook: always inline."""

    name: str
    version: int
    payload: InlineBytes


@dataclass(frozen=True, slots=True)
class CheckpointProperties:
    """What the V4+ trailer (Java-serialized CheckpointProperties) says."""

    snapshot_type: str  # 'checkpoint' | 'savepoint'
    type_name: Optional[str]  # "Checkpoint", "Full Checkpoint", "Savepoint", ...
    format: Optional[str]  # savepoints: 'CANONICAL' | 'NATIVE'; checkpoints: None
    sharing: Optional[str]  # 'FORWARD_BACKWARD' | 'FORWARD' | 'NO_SHARING'
    post_checkpoint_action: Optional[str] = None  # savepoints: NONE | SUSPEND | TERMINATE
    flags: tuple[tuple[str, bool], ...] = ()  # forced, discard*, unclaimed as found

    def flag(self, name: str) -> Optional[bool]:
        return dict(self.flags).get(name)

__all__ = [
    "DISTRIBUTION_MODES",
    "EMPTY_SEGMENT",
    "AnyChannelHandle",
    "ByteStreamHandle",
    "ChangelogEntry",
    "ChangelogFileHandle",
    "ChangelogHandle",
    "ChannelStateHandle",
    "CheckpointProperties",
    "EmptySegmentFileHandle",
    "FileHandle",
    "FileMergingOperatorHandle",
    "InMemoryChangelogHandle",
    "IncrementalKeyedHandle",
    "InlineBytes",
    "KeyGroupsHandle",
    "KeyedHandle",
    "MasterState",
    "MergedChannelEntry",
    "MergedChannelStateHandle",
    "NamedHandle",
    "OperatorHandle",
    "OperatorState",
    "OperatorStateMeta",
    "OperatorStreamHandle",
    "RelativeFileHandle",
    "SegmentFileHandle",
    "StateChange",
    "StreamHandle",
    "SubtaskState",
    "pack_offsets",
]
