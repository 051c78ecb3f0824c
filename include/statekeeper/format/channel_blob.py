"""Decode/encode the per-channel blob of a V6 merged channel-state handle (spec §4.5).

Flink itself decodes the blob lazily (AbstractMergedChannelStateHandle), so a parse of the
`_metadata` file does not validate it either; decoding here is strict and bounds-checked.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import CorruptMetadataError

_I = struct.Struct(">i").unpack_from
_IIQI = struct.Struct(">iiqi").unpack_from


@dataclass(frozen=True, slots=True)
class MergedChannelEntry:
    """One channel of a merged channel-state handle: its info (gate or partition, subpartition or
    channel index), the size of its state and its offsets in the delegate."""

    info: tuple[int, int]
    size: int
    offsets: tuple[int, ...]


def decode_merged_blob(raw: bytes, uri: str = "<merged channel blob>") -> tuple[MergedChannelEntry, ...]:
    n = len(raw)
    if n < 4:
        raise CorruptMetadataError(uri, 0, f"merged channel blob of {n} bytes has no count")
    (count,) = _I(raw, 0)
    if count < 0 or count * 20 > n - 4:
        raise CorruptMetadataError(uri, 0, f"merged channel blob count {count} impossible for {n} bytes")
    pos = 4
    out = []
    for _ in range(count):
        if pos + 20 > n:
            raise CorruptMetadataError(uri, pos, "merged channel blob ends inside an entry")
        a, b, size, n_off = _IIQI(raw, pos)
        pos += 20
        if n_off < 0 or pos + 8 * n_off > n:
            raise CorruptMetadataError(uri, pos - 4, f"merged channel blob offset count {n_off} impossible")
        offsets = struct.unpack_from(f">{n_off}q", raw, pos)
        pos += 8 * n_off
        out.append(MergedChannelEntry((a, b), size, offsets))
    if pos != n:
        raise CorruptMetadataError(uri, pos, f"{n - pos} trailing bytes in merged channel blob")
    return tuple(out)


def encode_merged_blob(entries) -> bytes:
    parts = [struct.pack(">i", len(entries))]
    for e in entries:
        parts.append(struct.pack(">iiqi", e.info[0], e.info[1], e.size, len(e.offsets)))
        parts.append(struct.pack(f">{len(e.offsets)}q", *e.offsets))
    return b"".join(parts)
