"""A tiny, bounded reader of Java Object Serialization streams (the V4+ trailer, spec §4.6).

It decodes the grammar of java.io.ObjectInputStream (class descriptors, objects, enums, strings,
arrays, back-references, block data) into plain Python values without loading any classes, so the
trailer's CheckpointProperties can be understood. The raw bytes are always kept and written back
verbatim; this module never re-encodes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Optional

from . import mutf8

STREAM_MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY, TC_CLASS = range(0x70, 0x77)
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG, TC_EXCEPTION = range(0x77, 0x7C)
TC_LONGSTRING, TC_PROXYCLASSDESC, TC_ENUM = 0x7C, 0x7D, 0x7E
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIM = {
    "B": (">b", 1), "C": (">H", 2), "D": (">d", 8), "F": (">f", 4), "I": (">i", 4),
    "J": (">q", 8), "S": (">h", 2), "Z": ("?", 1),
}
_MAX_DEPTH = 64
_END = object()

CHECKPOINT_PROPERTIES = "org.apache.flink.runtime.checkpoint.CheckpointProperties"


class JavaSerializationError(ValueError):
    def __init__(self, pos: int, msg: str):
        self.pos = pos
        super().__init__(msg)


@dataclass
class JClassDesc:
    name: str
    suid: int
    flags: int = 0
    fields: list[tuple[str, str]] = field(default_factory=list)  # (typecode, name)
    superclass: Optional["JClassDesc"] = None


@dataclass
class JObject:
    class_name: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JEnum:
    class_name: str
    constant: str


class _Reader:
    def __init__(self, data: bytes):
        self.d = data
        self.p = 0
        self.handles: list[Any] = []

    def _take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.d):
            raise JavaSerializationError(self.p, f"stream ends: needed {n} bytes")
        b = self.d[self.p : self.p + n]
        self.p += n
        return b

    def u8(self) -> int:
        return self._take(1)[0]

    def unpack(self, fmt: str, n: int):
        return struct.unpack(fmt, self._take(n))[0]

    def utf(self) -> str:
        n = self.unpack(">H", 2)
        return self._decode(self._take(n))

    def long_utf(self) -> str:
        n = self.unpack(">q", 8)
        return self._decode(self._take(n))

    def _decode(self, raw: bytes) -> str:
        try:
            return mutf8.decode(raw)
        except mutf8.MUTF8Error as exc:
            raise JavaSerializationError(self.p, f"invalid string: {exc}") from None

    def assign(self, obj: Any) -> None:
        self.handles.append(obj)

    def reference(self) -> Any:
        h = self.unpack(">i", 4) - BASE_HANDLE
        if not 0 <= h < len(self.handles):
            raise JavaSerializationError(self.p - 4, f"back-reference to unknown handle {h}")
        return self.handles[h]

    # -- grammar

    def content(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise JavaSerializationError(self.p, "object graph nested too deeply")
        at = self.p
        tc = self.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self.reference()
        if tc == TC_STRING:
            s = self.utf()
            self.assign(s)
            return s
        if tc == TC_LONGSTRING:
            s = self.long_utf()
            self.assign(s)
            return s
        if tc in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            self.p = at
            return self.class_desc(depth)
        if tc == TC_OBJECT:
            return self.new_object(depth)
        if tc == TC_ENUM:
            desc = self.class_desc(depth)
            if desc is None:
                raise JavaSerializationError(at, "enum without class descriptor")
            slot = len(self.handles)
            self.assign(None)
            name = self.content(depth + 1)
            if not isinstance(name, str):
                raise JavaSerializationError(at, "enum constant name is not a string")
            value = JEnum(desc.name, name)
            self.handles[slot] = value
            return value
        if tc == TC_ARRAY:
            return self.new_array(depth)
        if tc == TC_CLASS:
            desc = self.class_desc(depth)
            self.assign(desc)
            return desc
        if tc == TC_BLOCKDATA:
            return self._take(self.u8())
        if tc == TC_BLOCKDATALONG:
            return self._take(self.unpack(">i", 4))
        if tc == TC_ENDBLOCKDATA:
            return _END
        if tc == TC_RESET:
            self.handles.clear()
            return self.content(depth)
        raise JavaSerializationError(at, f"unsupported type code 0x{tc:02x}")

    def class_desc(self, depth: int) -> Optional[JClassDesc]:
        at = self.p
        tc = self.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            desc = self.reference()
            if not isinstance(desc, JClassDesc):
                raise JavaSerializationError(at, "reference is not a class descriptor")
            return desc
        if tc == TC_CLASSDESC:
            name = self.utf()
            suid = self.unpack(">q", 8)
            desc = JClassDesc(name, suid)
            self.assign(desc)
            desc.flags = self.u8()
            nfields = self.unpack(">H", 2)
            for _ in range(nfields):
                code = chr(self.u8())
                fname = self.utf()
                if code in "L[":
                    type_name = self.content(depth + 1)
                    if not isinstance(type_name, str):
                        raise JavaSerializationError(self.p, "field type name is not a string")
                elif code not in _PRIM:
                    raise JavaSerializationError(self.p, f"bad field type code {code!r}")
                desc.fields.append((code, fname))
            self.annotation(depth)
            desc.superclass = self.class_desc(depth + 1)
            return desc
        if tc == TC_PROXYCLASSDESC:
            desc = JClassDesc("<proxy>", 0)
            self.assign(desc)
            for _ in range(self.unpack(">i", 4)):
                self.utf()
            self.annotation(depth)
            desc.superclass = self.class_desc(depth + 1)
            return desc
        raise JavaSerializationError(at, f"expected a class descriptor, found 0x{tc:02x}")

    def annotation(self, depth: int) -> None:
        while True:
            if self.content(depth + 1) is _END:
                return

    def new_object(self, depth: int) -> JObject:
        at = self.p
        desc = self.class_desc(depth)
        if desc is None:
            raise JavaSerializationError(at, "object without class descriptor")
        obj = JObject(desc.name)
        self.assign(obj)
        chain = []
        d: Optional[JClassDesc] = desc
        while d is not None:
            chain.append(d)
            d = d.superclass
        for cd in reversed(chain):
            if cd.flags & SC_EXTERNALIZABLE:
                if not cd.flags & SC_BLOCK_DATA:
                    raise JavaSerializationError(self.p, f"old-format externalizable {cd.name}")
                self.annotation(depth)
            elif cd.flags & SC_SERIALIZABLE:
                for code, fname in cd.fields:
                    obj.fields[fname] = self.value(code, depth)
                if cd.flags & SC_WRITE_METHOD:
                    self.annotation(depth)
        return obj

    def new_array(self, depth: int) -> list:
        at = self.p
        desc = self.class_desc(depth)
        if desc is None or not desc.name.startswith("["):
            raise JavaSerializationError(at, "array without array class descriptor")
        out: list = []
        self.assign(out)
        n = self.unpack(">i", 4)
        code = desc.name[1:2]
        size = _PRIM[code][1] if code in _PRIM else 1
        if n < 0 or n * size > len(self.d) - self.p:
            raise JavaSerializationError(at, f"array length {n} impossible")
        for _ in range(n):
            out.append(self.value(code, depth))
        return out

    def value(self, code: str, depth: int) -> Any:
        if code in "L[":
            v = self.content(depth + 1)
            if v is _END:
                raise JavaSerializationError(self.p, "unexpected end of block data")
            return v
        fmt, n = _PRIM[code]
        return self.unpack(fmt, n)


def read_stream(data: bytes) -> tuple[Any, int]:
    """Decode the first object of a Java serialization stream. Returns (value, bytes consumed)."""
    if data[:4] != STREAM_MAGIC:
        raise JavaSerializationError(0, "not a Java serialization stream (missing AC ED 00 05)")
    r = _Reader(data)
    r.p = 4
    value = r.content(0)
    if value is _END:
        raise JavaSerializationError(4, "stream starts with end-of-block-data")
    return value, r.p


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def interpret_properties(value: Any):
    """Turn a decoded CheckpointProperties object into the model, or None for a null trailer."""
    from .model import CheckpointProperties

    if value is None:
        return None
    if not isinstance(value, JObject) or value.class_name != CHECKPOINT_PROPERTIES:
        got = value.class_name if isinstance(value, JObject) else type(value).__name__
        raise JavaSerializationError(4, f"trailer holds {got}, not {CHECKPOINT_PROPERTIES}")
    flags = tuple(sorted((k, v) for k, v in value.fields.items() if isinstance(v, bool)))
    ctype = value.fields.get("checkpointType")
    if not isinstance(ctype, JObject):
        raise JavaSerializationError(4, "CheckpointProperties without a checkpointType object")

    def enum(name: str) -> Optional[str]:
        v = ctype.fields.get(name)
        return v.constant if isinstance(v, JEnum) else None

    type_name = ctype.fields.get("name") if isinstance(ctype.fields.get("name"), str) else None
    is_savepoint = "Savepoint" in _simple(ctype.class_name)
    if is_savepoint:
        return CheckpointProperties(
            snapshot_type="savepoint",
            type_name=type_name,
            format=enum("formatType"),
            sharing="NO_SHARING",
            post_checkpoint_action=enum("postCheckpointAction"),
            flags=flags,
        )
    return CheckpointProperties(
        snapshot_type="checkpoint",
        type_name=type_name,
        format=None,
        sharing=enum("sharingFilesStrategy"),
        flags=flags,
    )
