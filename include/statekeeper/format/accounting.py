"""Byte accounting of a model: where the bytes of `_metadata` go."""
from __future__ import annotations

from dataclasses import dataclass

from .handles import (
    ByteStreamHandle,
    InMemoryChangelogHandle,
    MasterState,
    MergedChannelStateHandle,
)
from .walk import Model, transform


@dataclass(frozen=True, slots=True)
class Accounting:
    total_size: int | None  # size of the parsed file (None for a model built in memory)
    inline_bytes: int  # all inline state: tag 1 (incl. coordinator), master states, tag 9
    coordinator_bytes: int
    master_bytes: int
    changelog_bytes: int  # tag-9 in-memory changelog changes
    handle_inline_bytes: int  # tag 1 in subtask state (what externalize_inline can move out)
    channel_blob_bytes: int  # V6 merged-channel offset blobs (not state, but inside the file)
    inline_handles: int

    @property
    def structure_bytes(self) -> int | None:
        """Everything that is not an inline payload: handles, paths, offsets, ids, trailer."""
        if self.total_size is None:
            return None
        return self.total_size - self.inline_bytes - self.channel_blob_bytes


def account(model: Model) -> Accounting:
    c = {"coord": 0, "master": 0, "log": 0, "handle": 0, "blob": 0, "n": 0}

    def visit(site, role, local_name, node):
        t = type(node)
        if t is ByteStreamHandle:
            c["n"] += 1
            if site.slot == "coordinator":
                c["coord"] += node.payload.length
            else:
                c["handle"] += node.payload.length
        elif t is MasterState:
            c["n"] += 1
            c["master"] += node.payload.length
        elif t is InMemoryChangelogHandle:
            c["n"] += 1
            c["log"] += sum(ch.payload.length for ch in node.changes)
        elif t is MergedChannelStateHandle:
            c["blob"] += node.blob.length
        return node

    transform(model, visit)
    inline = c["coord"] + c["master"] + c["log"] + c["handle"]
    return Accounting(
        total_size=model.total_size, inline_bytes=inline, coordinator_bytes=c["coord"],
        master_bytes=c["master"], changelog_bytes=c["log"], handle_inline_bytes=c["handle"],
        channel_blob_bytes=c["blob"], inline_handles=c["n"],
    )
