"""Typed, immutable model of a Flink `_metadata` file (spec §3-§4).

Every field needed to re-serialize the file byte-for-byte is kept, including fields Flink ignores
(V2 chain length and duration), because a maintenance tool must never change what it does not
mean to change. Inline payloads are `InlineBytes`: an (offset, length) window into the source,
loaded only on request, so a multi-GB file is modelled in bounded memory.

IDs are 32-character lower-case hex strings, exactly as Flink prints OperatorID (spec §2).
Offsets arrays (key-group offsets, operator-state partition offsets, channel offsets) are kept as
the raw big-endian bytes of the file (`offsets_be`) and decoded on access via `.offsets`: they are
never needed for references, and keeping bytes keeps parsing lean and memory proportional.

This module is the model's one address: the file (`CheckpointMetadata`) and every record it is made
of (defined in `statekeeper.format.handles`, below the traversal and the accounting, which the file's
`inline_bytes` uses).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .accounting import account
from .handles import (
    DISTRIBUTION_MODES,
    EMPTY_SEGMENT,
    AnyChannelHandle,
    ByteStreamHandle,
    ChangelogEntry,
    ChangelogFileHandle,
    ChangelogHandle,
    ChannelStateHandle,
    CheckpointProperties,
    EmptySegmentFileHandle,
    FileHandle,
    FileMergingOperatorHandle,
    InMemoryChangelogHandle,
    IncrementalKeyedHandle,
    InlineBytes,
    KeyGroupsHandle,
    KeyedHandle,
    MasterState,
    MergedChannelEntry,
    MergedChannelStateHandle,
    NamedHandle,
    OperatorHandle,
    OperatorState,
    OperatorStateMeta,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StateChange,
    StreamHandle,
    SubtaskState,
    pack_offsets,
)

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
    "CheckpointMetadata",
]


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """A whole `_metadata` file."""

    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    trailer: Optional[bytes] = None  # V4+: the raw Java serialization stream, copied verbatim
    properties: Optional[CheckpointProperties] = None  # decoded trailer; None if absent or null
    total_size: Optional[int] = field(default=None, compare=False)  # size of the parsed file
    uri: Optional[str] = field(default=None, compare=False)  # where it was parsed from

    @property
    def snapshot_type(self) -> Optional[str]:
        return self.properties.snapshot_type if self.properties else None

    @property
    def inline_bytes(self) -> int:
        """All bytes of inline payloads (tag 1 incl. coordinator state, master states, tag 9)."""
        return account(self).inline_bytes

    def operator(self, operator_id: str) -> OperatorState:
        for op in self.operators:
            if op.operator_id == operator_id:
                return op
        raise KeyError(operator_id)
