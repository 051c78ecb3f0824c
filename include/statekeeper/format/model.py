"""Typed, immutable model of a Flink `_metadata` file (spec §3-§4): the file (`CheckpointMetadata`) and,
re-exported, every record it is made of.

The records are defined in `statekeeper.format.handles` (how they keep every byte of the file, and
inline payloads as windows into it, is described there), below the traversal (`walk`) and the
byte accounting, which this module's `CheckpointMetadata.inline_bytes` uses. This module is the
model's one address: import records from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .accounting import account
from .handles import *  # noqa: F403 - every record, re-exported: this module is the model's one address
from .handles import CheckpointProperties, MasterState, OperatorState
from .handles import __all__ as _records

__all__ = [*_records, "CheckpointMetadata"]


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
