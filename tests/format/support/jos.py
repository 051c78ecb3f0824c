"""Minimal Java Object Serialization *writer* for test trailers, shaped exactly like the stream
ObjectOutputStream writes for Flink's CheckpointProperties (fields sorted: primitives first)."""
from __future__ import annotations

import struct

from statekeeper.format import mutf8

PKG = "org.apache.flink.runtime.checkpoint."


class _W:
    def __init__(self):
        self.out = bytearray(b"\xac\xed\x00\x05")
        self.handles: dict[str, int] = {}
        self.next = 0x7E0000

    def utf(self, s):
        raw = mutf8.encode(s)
        self.out += struct.pack(">H", len(raw)) + raw

    def new_handle(self, key=None):
        h = self.next
        self.next += 1
        if key is not None:
            self.handles[key] = h
        return h

    def string(self, s):
        key = "s:" + s
        if key in self.handles:
            self.out += b"\x71" + struct.pack(">i", self.handles[key])
            return
        self.out += b"\x74"
        self.new_handle(key)
        self.utf(s)

    def classdesc(self, name, suid, flags, fields, superclass=None):
        key = "c:" + name
        if key in self.handles:
            self.out += b"\x71" + struct.pack(">i", self.handles[key])
            return
        self.out += b"\x72"
        self.utf(name)
        self.out += struct.pack(">q", suid)
        self.new_handle(key)
        self.out += bytes([flags]) + struct.pack(">H", len(fields))
        for code, fname, tname in fields:
            self.out += code.encode()
            self.utf(fname)
            if code in "L[":
                self.string(tname)
        self.out += b"\x78"
        if superclass is None:
            self.out += b"\x70"
        else:
            superclass()

    def enum(self, cls, const):
        self.out += b"\x7e"
        self.classdesc(cls, 0, 0x12, [], lambda: self.classdesc("java.lang.Enum", 0, 0x12, []))
        self.new_handle()
        self.string(const)


def checkpoint_properties(kind: str = "checkpoint", fmt: str = "CANONICAL", sharing: str = "FORWARD_BACKWARD") -> bytes:
    w = _W()
    w.out += b"\x73"
    bools = ["discardCancelled", "discardFailed", "discardFinished", "discardSubsumed",
             "discardSuspended", "forced", "unclaimed"]
    fields = [("Z", b, None) for b in bools] + [("L", "checkpointType", f"L{PKG.replace('.', '/')}SnapshotType;")]
    w.classdesc(PKG + "CheckpointProperties", 2, 0x02, fields)
    w.new_handle()
    w.out += bytes([1, 1, 1, 1, 1, 0, 0])
    w.out += b"\x73"
    if kind == "checkpoint":
        w.classdesc(PKG + "CheckpointType", 0x1234, 0x02, [
            ("L", "name", "Ljava/lang/String;"),
            ("L", "sharingFilesStrategy", f"L{PKG.replace('.', '/')}SnapshotType$SharingFilesStrategy;"),
        ])
        w.new_handle()
        w.string("Checkpoint" if sharing == "FORWARD_BACKWARD" else "Full Checkpoint")
        w.enum(PKG + "SnapshotType$SharingFilesStrategy", sharing)
    else:
        w.classdesc(PKG + "SavepointType", 0x4321, 0x02, [
            ("L", "formatType", "Lorg/apache/flink/core/execution/SavepointFormatType;"),
            ("L", "name", "Ljava/lang/String;"),
            ("L", "postCheckpointAction", f"L{PKG.replace('.', '/')}SavepointType$PostCheckpointAction;"),
        ])
        w.new_handle()
        w.enum("org.apache.flink.core.execution.SavepointFormatType", fmt)
        w.string("Savepoint")
        w.enum(PKG + "SavepointType$PostCheckpointAction", "NONE")
    return bytes(w.out)


NULL_TRAILER = b"\xac\xed\x00\x05\x70"
