"""Streaming, fail-closed reader of Flink `_metadata` files (versions 2-6).

Design:
* One pass over a seekable source through a buffer refilled in 1 MiB chunks; values are decoded
  with precompiled `struct` unpackers straight from the buffer. Inline payloads are skipped by
  seeking (recorded as offset + length) unless `load_inline` is set, so memory does not grow with
  the size of inlined state.
* Before every variable-length read and every loop, the count/length is checked against the
  bytes left in the file, so corrupt input can neither allocate much nor loop long.
* Counts that become model objects are also held to absolute caps (format/limits.py), checked
  once per list, never per entry, so a sparse file cannot build a model far larger than any real
  checkpoint's; `limits=` lifts them.
* Every failure is a MetadataFormatError subclass naming the object, byte offset and context.

Performance notes: the per-handle hot paths (`_stream`, `_named_list`) refill the buffer to a
small window, then decode the common tags (1, 2, 6) straight from it when the whole record is
buffered; otherwise (long strings, end of buffer, truncated file) they fall back to the
field-by-field readers, which refill as needed and raise precise truncation errors.
"""
from __future__ import annotations

import gc
import struct
import sys
from typing import Any, Optional

from . import mutf8
from . import tags as T
from .errors import (
    CorruptMetadataError,
    InvalidStringError,
    MetadataFormatError,
    MetadataLimitError,
    NotFlinkMetadataError,
    TrailingBytesError,
    TruncatedMetadataError,
    UnknownHandleTagError,
    UnknownMetadataVersionError,
    UnsupportedMetadataVersionError,
)
from .javaser import JavaSerializationError, interpret_properties, read_stream
from .model import (
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
    MergedChannelStateHandle,
    NamedHandle,
    OperatorState,
    OperatorStateMeta,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StateChange,
    SubtaskState,
)
from .limits import DEFAULT_LIMITS, WHY, MetadataLimits
from .source import opened, source_size

# Read granularity. Small enough that inline payloads larger than a chunk are skipped by seeking
# (never read), large enough that per-read overhead is negligible.
CHUNK = 1 << 16
# Bytes the hot paths try to have buffered before decoding one handle. Typical handles are a few
# hundred bytes; a record that does not fit is decoded by the field-by-field slow path instead.
_WINDOW = 4096
MAX_NESTING = 16  # handles nest (changelog → incremental → key groups) only a few levels deep
TRAILER_LIMIT = 1 << 20  # a CheckpointProperties stream is a few hundred bytes
SMALL_BLOB = 1 << 16  # merged channel blobs up to this size are loaded eagerly

_i = struct.Struct(">i").unpack_from
_ii = struct.Struct(">ii").unpack_from
_q = struct.Struct(">q").unpack_from
_qq = struct.Struct(">qq").unpack_from
_H = struct.Struct(">H").unpack_from
_iH = struct.Struct(">iH").unpack_from
_qH = struct.Struct(">qH").unpack_from
_qqiH = struct.Struct(">qqiH").unpack_from
_b = struct.Struct(">b").unpack_from

_ERR = (struct.error, IndexError)

# Decoded trailers by their exact bytes. A store holds only a handful of distinct trailers (one per
# checkpoint type and flag combination), and decoding the Java serialization stream was ~15% of a
# whole parse. Only successful decodes are kept, and the value is immutable, so a hit is exactly
# what decoding would return. Real trailers are a few hundred bytes; only those up to
# _TRAILER_CACHE_BYTES are kept, so odd files cannot make the cache hold more than 1 MiB.
_TRAILERS: dict[bytes, Any] = {}
_TRAILER_CACHE_SIZE = 256
_TRAILER_CACHE_BYTES = 4096
_UNSEEN = object()

# Hot-path construction of the two most numerous frozen records without the generated frozen
# __init__ (which routes every field through object.__setattr__): allocate, then set the slots
# through their member descriptors. Semantically identical; ~2x faster per object.
_new = object.__new__
_FH_path = FileHandle.path.__set__
_FH_size = FileHandle.size.__set__
_NH_name = NamedHandle.local_name.__set__
_NH_handle = NamedHandle.handle.__set__


class _Reader:
    __slots__ = (
        "src", "uri", "size", "load", "version", "max_tag", "buf", "pos", "base", "src_pos", "ctx",
        "limits", "max_par", "list_cap", "entries_left", "subtasks_left",
    )

    def __init__(self, src: Any, uri: str, size: int, load_inline: bool,
                 limits: MetadataLimits = DEFAULT_LIMITS):
        self.src = src
        self.uri = uri
        self.size = size
        self.load = load_inline
        self.version = 0
        self.max_tag = 17
        self.buf = b""
        self.pos = 0
        self.base = 0  # file offset of buf[0]
        self.src_pos = src.tell()
        self.ctx: tuple = ("file header",)
        self.limits = limits
        # The caps read on hot paths, and the per-file budgets that count down as lists are read.
        self.max_par = limits.max_parallelism
        self.list_cap = limits.max_handles_per_list
        self.entries_left = limits.max_entries
        self.subtasks_left = limits.max_subtask_states

    # ------------------------------------------------------------------ buffer management

    def _fill(self, n: int) -> None:
        """Make at least n bytes available at pos, or everything up to end of file."""
        buf = self.buf
        pos = self.pos
        have = len(buf) - pos
        if have >= n:
            return
        start = self.base + len(buf)
        left = self.size - start
        if left <= 0:
            return
        want = min(max(n - have, CHUNK), left)
        if self.src_pos != start:
            self.src.seek(start)
        parts = []
        got = 0
        while got < want:
            data = self.src.read(want - got)
            if not data:
                break
            parts.append(data)
            got += len(data)
        self.src_pos = start + got
        if got < want:
            raise TruncatedMetadataError(
                self.uri, start + got,
                f"the object is shorter than its stated size {self.size} (changed while reading?)",
            )
        self.buf = buf[pos:] + (parts[0] if len(parts) == 1 else b"".join(parts))
        self.base += pos
        self.pos = 0

    def _skip(self, n: int) -> None:
        if self.pos + n <= len(self.buf):
            self.pos += n
        else:
            target = self.base + self.pos + n
            self.buf = b""
            self.base = target
            self.pos = 0

    def _take(self, n: int) -> bytes:
        """n raw bytes (n already checked against the file size)."""
        if len(self.buf) - self.pos < n:
            self._fill(n)
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise self._truncated(f"{n} bytes", n)
        self.pos = end
        return self.buf[pos:end]

    # ------------------------------------------------------------------ errors

    def _where(self) -> str:
        c = self.ctx
        if c[0] == "operator":
            _, i, op_id, sub = c
            s = f"operator #{i} ({op_id})"
            return s if sub is None else f"{s}, subtask {sub}"
        return c[0]

    def _truncated(self, what: str, need: int) -> MetadataFormatError:
        at = self.base + self.pos
        left = max(self.size - at, 0)
        return TruncatedMetadataError(
            self.uri, at, f"file ends while reading {what} in {self._where()}: "
            f"needs {need} bytes, {left} left",
        )

    def _corrupt(self, at: int, problem: str, cls=CorruptMetadataError) -> MetadataFormatError:
        return cls(self.uri, at, f"{problem} (in {self._where()})")

    def _too_new(self, at: int, tag: int) -> MetadataFormatError:
        return self._corrupt(
            at, f"tag {tag} ({T.tag_name(tag)}) cannot appear in a V{self.version} file: no Flink "
            f"release writing V{self.version} knows it (highest: {self.max_tag})",
        )

    def _bad_tag(self, at: int, tag: int, position: str) -> MetadataFormatError:
        if tag < 0 or tag > 17:
            return self._corrupt(
                at, f"unknown {position} handle tag {tag} (this reader knows tags 0-17)",
                UnknownHandleTagError,
            )
        return self._corrupt(at, f"tag {tag} ({T.tag_name(tag)}) is not valid in {position} position")

    # ------------------------------------------------------------------ primitives

    def i8(self, what: str) -> int:
        if len(self.buf) - self.pos < 1:
            self._fill(1)
        try:
            (v,) = _b(self.buf, self.pos)
        except _ERR:
            raise self._truncated(what, 1) from None
        self.pos += 1
        return v

    def u8(self, what: str) -> int:
        if len(self.buf) - self.pos < 1:
            self._fill(1)
        try:
            v = self.buf[self.pos]
        except _ERR:
            raise self._truncated(what, 1) from None
        self.pos += 1
        return v

    def i32(self, what: str) -> int:
        if len(self.buf) - self.pos < 4:
            self._fill(4)
        try:
            (v,) = _i(self.buf, self.pos)
        except _ERR:
            raise self._truncated(what, 4) from None
        self.pos += 4
        return v

    def i64(self, what: str) -> int:
        if len(self.buf) - self.pos < 8:
            self._fill(8)
        try:
            (v,) = _q(self.buf, self.pos)
        except _ERR:
            raise self._truncated(what, 8) from None
        self.pos += 8
        return v

    def utf(self, what: str) -> str:
        if len(self.buf) - self.pos < 2:
            self._fill(2)
        try:
            (n,) = _H(self.buf, self.pos)
        except _ERR:
            raise self._truncated(what, 2) from None
        if len(self.buf) - self.pos < 2 + n:
            self._fill(2 + n)
        start = self.pos + 2
        end = start + n
        if end > len(self.buf):
            raise self._truncated(what, 2 + n)
        raw = self.buf[start:end]
        self.pos = end
        return self._decode(raw, start, what)

    def _decode(self, raw: bytes, start: int, what: str) -> str:
        if raw.isascii() and b"\x00" not in raw:
            return raw.decode("ascii")
        try:
            return mutf8.decode(raw)
        except mutf8.MUTF8Error as exc:
            raise self._corrupt(
                self.base + start - 2, f"{what} is not valid modified UTF-8: {exc}", InvalidStringError,
            ) from None

    def boolean(self, what: str) -> bool:
        at = self.base + self.pos
        v = self.u8(what)
        if v > 1:
            raise self._corrupt(at, f"{what} is {v}, expected a boolean 0 or 1")
        return v == 1

    def count(self, n: int, min_bytes: int, what: str, at: int) -> int:
        """Validate a count read at `at` against the bytes left, before allocating or looping."""
        if n < 0:
            raise self._corrupt(at, f"negative {what} {n}")
        left = self.size - self.base - self.pos
        if n * min_bytes > left:
            raise self._corrupt(
                at, f"{what} {n} needs at least {n * min_bytes} bytes but only {left} are left",
            )
        return n

    def _limit(self, at: int, what: str, declared: int, field: str) -> MetadataFormatError:
        return MetadataLimitError(
            self.uri, at, what=what, where=self._where(), declared=declared,
            limit=getattr(self.limits, field), field=field, why=WHY[field],
        )

    def entries(self, n: int, min_bytes: int, what: str, at: int, cap: int, field: str) -> int:
        """A count of model objects: checked against the bytes left, its cap, and the file's
        budget of entries, once per list before anything is allocated."""
        self.count(n, min_bytes, what, at)
        if n > cap:
            raise self._limit(at, what, n, field)
        self._spend(n, what, at)
        return n

    def _spend(self, n: int, what: str, at: int) -> None:
        left = self.entries_left - n
        if left < 0:
            raise self._limit(
                at, f"entries declared so far (operators, subtasks, list entries; this {what}: {n})",
                self.limits.max_entries - left, "max_entries",
            )
        self.entries_left = left

    def offsets(self, what: str) -> bytes:
        at = self.base + self.pos
        n = self.count(self.i32(f"number of {what}"), 8, f"number of {what}", at)
        return self._take(8 * n) if n else b""

    def inline(self, n: int, what: str, at: int, load: bool) -> InlineBytes:
        """An inline payload of n bytes at the current position: loaded or skipped."""
        if n < 0:
            raise self._corrupt(at, f"negative length {n} of {what}")
        start = self.base + self.pos
        if n > self.size - start:
            raise self._corrupt(
                at, f"{what} claims {n} bytes but only {self.size - start} are left", TruncatedMetadataError,
            )
        if load:
            return InlineBytes(start, n, self._take(n))
        self._skip(n)
        return InlineBytes(start, n, None)

    # ------------------------------------------------------------------ file structure

    def parse(self) -> CheckpointMetadata:
        if self.size < 4:
            raise NotFlinkMetadataError(
                self.uri, 0, f"file has only {self.size} bytes; a `_metadata` file starts with a 4-byte magic number"
            )
        magic = self.i32("magic number") & 0xFFFFFFFF
        if magic != T.MAGIC:
            raise NotFlinkMetadataError(
                self.uri, 0, f"bad magic number 0x{magic:08X}, expected 0x{T.MAGIC:08X}"
            )
        version = self.i32("metadata version")
        if version == 1:
            raise UnsupportedMetadataVersionError(
                self.uri, 4, "unsupported metadata version 1 (Flink 1.2 and older; obsolete)", version=version)
        if version not in T.SUPPORTED_VERSIONS:
            raise UnknownMetadataVersionError(self.uri, 4, version)
        self.version = version
        self.max_tag = T.MAX_TAG_FOR_VERSION[version]
        self.ctx = ("checkpoint header",)
        at = self.base + self.pos
        checkpoint_id = self.i64("checkpoint id")
        if checkpoint_id < 0:
            raise self._corrupt(at, f"invalid checkpoint id {checkpoint_id}")
        self.ctx = ("master states",)
        at = self.base + self.pos
        n_master = self.entries(
            self.i32("number of master states"), 18, "number of master states", at,
            self.limits.max_master_states, "max_master_states",
        )
        masters = tuple(self.master_state(i) for i in range(n_master))
        self.ctx = ("operator list",)
        at = self.base + self.pos
        min_op = 32 if version == 2 else (29 if version < 5 else 33)
        n_ops = self.entries(
            self.i32("number of operators"), min_op, "number of operators", at,
            self.limits.max_operators, "max_operators",
        )
        operators = tuple(self.operator(i) for i in range(n_ops))
        self.ctx = ("end of file",)
        end = self.base + self.pos
        left = self.size - end
        trailer = None
        properties = None
        if version >= 4:
            trailer, properties = self.trailer(end, left)
        elif left:
            raise self._corrupt(
                end, f"{left} bytes of trailing garbage after the last operator (a V{version} file "
                "has no trailer)", TrailingBytesError,
            )
        return CheckpointMetadata(
            version=version,
            checkpoint_id=checkpoint_id,
            master_states=masters,
            operators=operators,
            trailer=trailer,
            properties=properties,
            total_size=self.size,
            uri=self.uri,
        )

    def trailer(self, at: int, left: int):
        self.ctx = ("CheckpointProperties trailer",)
        if left == 0:
            raise TruncatedMetadataError(
                self.uri, at, f"V{self.version} file ends without its CheckpointProperties trailer"
            )
        if left > TRAILER_LIMIT:
            raise self._corrupt(at, f"trailer of {left} bytes is far too large for CheckpointProperties")
        raw = self._take(left)
        properties = _TRAILERS.get(raw, _UNSEEN)
        if properties is _UNSEEN:
            try:
                value, _used = read_stream(raw)
                properties = interpret_properties(value)
            except JavaSerializationError as exc:
                raise self._corrupt(
                    at + exc.pos, f"trailer is not a valid Java-serialized CheckpointProperties: {exc}"
                ) from None
            if len(raw) <= _TRAILER_CACHE_BYTES and len(_TRAILERS) < _TRAILER_CACHE_SIZE:
                _TRAILERS[raw] = properties
        return raw, properties

    def master_state(self, i: int) -> MasterState:
        self.ctx = (f"master state #{i}",)
        at = self.base + self.pos
        magic = self.i32("master state magic number")
        if magic != T.MASTER_STATE_MAGIC:
            raise self._corrupt(at, f"bad master state magic 0x{magic & 0xFFFFFFFF:08X}, expected 0xC96B1696")
        at_len = self.base + self.pos
        n = self.i32("master state length")
        if n <= 0:
            raise self._corrupt(at_len, f"master state length {n} must be positive")
        start = self.base + self.pos
        if n > self.size - start:
            raise self._corrupt(
                at_len, f"master state length {n} exceeds the {self.size - start} bytes left",
                TruncatedMetadataError,
            )
        version = self.i32("master state version")
        name = self.utf("master state name")
        at_plen = self.base + self.pos
        used = at_plen - start
        if used + 4 > n:
            raise self._corrupt(start, f"master state record of {n} bytes ends inside its header")
        plen = self.i32("master state payload length")
        if plen < 0 or used + 4 + plen != n:
            raise self._corrupt(
                at_plen, f"master state payload length {plen} does not fill its {n}-byte record "
                "exactly (Flink rejects trailing bytes)",
            )
        payload = self.inline(plen, "master state payload", at_plen, self.load)
        return MasterState(name=name, version=version, payload=payload)

    def operator(self, i: int) -> OperatorState:
        version = self.version
        self.ctx = ("operator", i, "?", None)
        name = uid = None
        if version >= 5:
            name = self.utf("operator name") or None
            uid = self.utf("operator uid") or None
        at = self.base + self.pos
        raw_id = self._take(16)
        op_id = raw_id.hex()
        self.ctx = ("operator", i, op_id, None)
        at_par = self.base + self.pos
        parallelism = self.i32("parallelism")
        max_parallelism = self.i32("max parallelism")
        if parallelism < 0 or max_parallelism < 0 or parallelism > max_parallelism:
            raise self._corrupt(
                at_par, f"impossible parallelism {parallelism} / max parallelism {max_parallelism}"
            )
        if max_parallelism > self.max_par:
            raise self._limit(at_par + 4, "max parallelism", max_parallelism, "max_parallelism")
        chain_length = None
        coordinator = None
        if version == 2:
            chain_length = self.i32("chain length")
        else:
            at_c = self.base + self.pos
            coordinator = self._stream(0)
            if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
                raise self._corrupt(
                    at_c, f"coordinator state must be inline (tag 1), found {coordinator.kind}"
                )
        at_n = self.base + self.pos
        n_sub = self.i32("number of subtask states")
        if n_sub == -1 and version >= 3:
            if coordinator is not None:
                raise self._corrupt(at_n, "fully finished operator has coordinator state")
            return OperatorState(
                operator_id=op_id, parallelism=parallelism, max_parallelism=max_parallelism,
                fully_finished=True, name=name, uid=uid,
            )
        self.count(n_sub, 4, "number of subtask states", at_n)
        if n_sub > parallelism:
            raise self._corrupt(at_n, f"{n_sub} subtask states for parallelism {parallelism}")
        left = self.subtasks_left - n_sub
        if left < 0:
            raise self._limit(
                at_n, f"subtask states declared so far (this operator: {n_sub})",
                self.limits.max_subtask_states - left, "max_subtask_states",
            )
        self.subtasks_left = left
        self._spend(n_sub, "number of subtask states", at_n)
        subtasks = []
        seen = set()
        for _ in range(n_sub):
            at_s = self.base + self.pos
            stored = self.i32("subtask index")
            finished = stored < 0 and version >= 3
            index = -stored - 1 if finished else stored
            if not 0 <= index < parallelism:
                raise self._corrupt(at_s, f"subtask index {index} outside parallelism {parallelism}")
            if index in seen:
                raise self._corrupt(at_s, f"subtask {index} appears twice")
            seen.add(index)
            self.ctx = ("operator", i, op_id, index)
            if finished:
                subtasks.append(SubtaskState(index=index, finished=True))
            else:
                subtasks.append(self.subtask(index))
        return OperatorState(
            operator_id=op_id, parallelism=parallelism, max_parallelism=max_parallelism,
            subtasks=tuple(subtasks), coordinator=coordinator, name=name, uid=uid,
            v2_chain_length=chain_length,
        )

    def subtask(self, index: int) -> SubtaskState:
        version = self.version
        duration = None
        if version == 2:
            duration = self.i64("subtask duration")
            at = self.base + self.pos
            legacy = self.i32("legacy state count")
            if legacy != 0:
                raise self._corrupt(at, f"legacy (Flink <= 1.1) state count {legacy}, expected 0")
        managed_op = self._op_slot("managed operator state")
        raw_op = self._op_slot("raw operator state")
        managed_keyed = self._keyed(0)
        raw_keyed = self._keyed(0)
        inputs: tuple = ()
        outputs: tuple = ()
        if version >= 3:
            inputs = self._channels(False)
            outputs = self._channels(True)
        return SubtaskState(
            index=index, managed_operator=managed_op, raw_operator=raw_op,
            managed_keyed=managed_keyed, raw_keyed=raw_keyed, input_channels=inputs,
            output_channels=outputs, v2_duration=duration,
        )

    # ------------------------------------------------------------------ operator state

    def _op_slot(self, what: str):
        at = self.base + self.pos
        flag = self.i32(f"{what} flag")
        if flag == 0:
            return None
        if flag != 1:
            raise self._corrupt(at, f"{what} presence flag is {flag}, expected 0 or 1")
        at = self.base + self.pos
        tag = self.i8(f"{what} handle tag")
        if tag > self.max_tag and tag <= 17:
            raise self._too_new(at, tag)
        if tag == T.PARTITIONABLE_OPERATOR_STATE_HANDLE or tag == T.SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE:
            at_n = self.base + self.pos
            n = self.entries(
                self.i32("number of operator states"), 7, "number of operator states", at_n,
                self.list_cap, "max_handles_per_list",
            )
            states = []
            for _ in range(n):
                name = sys.intern(self.utf("operator state name"))
                at_m = self.base + self.pos
                mode = self.i8("distribution mode")
                if not 0 <= mode <= 2:
                    raise self._corrupt(at_m, f"distribution mode ordinal {mode}, expected 0-2")
                states.append(OperatorStateMeta(name, mode, self.offsets("partition offsets")))
            if tag == T.PARTITIONABLE_OPERATOR_STATE_HANDLE:
                return OperatorStreamHandle(tuple(states), self._stream(0))
            task_owned = self.utf("task-owned managed directory")
            shared = self.utf("shared managed directory")
            is_empty = self.boolean("isEmpty flag")
            at_d = self.base + self.pos
            delegate = self._stream(0)
            if not isinstance(delegate, (SegmentFileHandle, type(EMPTY_SEGMENT))):
                found = "null" if delegate is None else delegate.kind
                raise self._corrupt(at_d, f"file-merging operator state needs a segment delegate, found {found}")
            return FileMergingOperatorHandle(tuple(states), task_owned, shared, is_empty, delegate)
        if tag == 0:
            raise self._corrupt(at, f"{what} flag says present but the handle is null")
        raise self._bad_tag(at, tag, "operator-state")

    # ------------------------------------------------------------------ keyed state

    def _kg_range(self, what: str) -> tuple[int, int]:
        at = self.base + self.pos
        if len(self.buf) - self.pos < 8:
            self._fill(8)
        try:
            start, num = _ii(self.buf, self.pos)
        except _ERR:
            raise self._truncated(f"{what} key-group range", 8) from None
        self.pos += 8
        if num < 0 or (num > 0 and start < 0):
            raise self._corrupt(at, f"invalid key-group range start {start}, count {num}")
        if num > 0 and start + num > self.max_par:
            raise self._limit(at, f"end of key-group range (start {start} + count {num})",
                              start + num, "max_parallelism")
        return start, num

    def _keyed(self, depth: int):
        at = self.base + self.pos
        tag = self.i8("keyed state handle tag")
        if tag == 0:
            return None
        if tag > self.max_tag and tag <= 17:
            raise self._too_new(at, tag)
        if depth > MAX_NESTING:
            raise self._corrupt(at, f"keyed handles nested deeper than {MAX_NESTING}")
        if tag == T.KEY_GROUPS_HANDLE_V2 or tag == T.KEY_GROUPS_HANDLE or tag == T.SAVEPOINT_KEY_GROUPS_HANDLE:
            start, num = self._kg_range("key-groups handle")
            self.count(num, 8, "number of key groups", at + 5)
            raw = self._take(8 * num) if num else b""
            delegate = self._stream(depth + 1)
            handle_id = self.utf("state handle id") if tag == T.KEY_GROUPS_HANDLE_V2 else None
            return KeyGroupsHandle(tag, start, num, raw, delegate, handle_id)
        if tag == T.INCREMENTAL_KEY_GROUPS_HANDLE_V2 or tag == T.INCREMENTAL_KEY_GROUPS_HANDLE:
            v2 = tag == T.INCREMENTAL_KEY_GROUPS_HANDLE_V2
            checkpoint_id = self.i64("incremental handle checkpoint id")
            backend_id = self.utf("backend id")
            start, num = self._kg_range("incremental handle")
            checkpointed_size = self.i64("checkpointed size") if v2 else None
            meta = self._stream(depth + 1)
            shared = self._named_list("shared state", depth + 1)
            private = self._named_list("private state", depth + 1)
            handle_id = self.utf("state handle id") if v2 else None
            return IncrementalKeyedHandle(
                tag, checkpoint_id, backend_id, start, num, checkpointed_size, meta, shared,
                private, handle_id,
            )
        if tag == T.CHANGELOG_HANDLE_V2 or tag == T.CHANGELOG_HANDLE:
            start, num = self._kg_range("changelog handle")
            checkpointed_size = self.i64("checkpointed size")
            at_n = self.base + self.pos
            n_mat = self.entries(self.i32("number of materialized handles"), 1, "number of materialized handles",
                                 at_n, self.list_cap, "max_handles_per_list")
            materialized = tuple(self._keyed(depth + 1) for _ in range(n_mat))
            at_n = self.base + self.pos
            n_delta = self.entries(self.i32("number of changelog deltas"), 1, "number of changelog deltas", at_n,
                                   self.list_cap, "max_handles_per_list")
            deltas = []
            for _ in range(n_delta):
                at_d = self.base + self.pos
                delta = self._keyed(depth + 1)
                if not isinstance(delta, (InMemoryChangelogHandle, ChangelogFileHandle)):
                    found = "null" if delta is None else delta.kind
                    raise self._corrupt(at_d, f"changelog delta must be a changelog handle (tag 9/10/13), found {found}")
                deltas.append(delta)
            materialization_id = self.i64("materialization id")
            checkpoint_id = self.i64("checkpoint id") if tag == T.CHANGELOG_HANDLE_V2 else None
            handle_id = self.utf("state handle id")
            return ChangelogHandle(
                tag, start, num, checkpointed_size, materialized, tuple(deltas),
                materialization_id, checkpoint_id, handle_id,
            )
        if tag == T.CHANGELOG_BYTE_INCREMENT_HANDLE:
            start, num = self._kg_range("in-memory changelog handle")
            seq_from = self.i64("sequence number from")
            seq_to = self.i64("sequence number to")
            at_n = self.base + self.pos
            n = self.entries(self.i32("number of changes"), 8, "number of changes", at_n,
                             self.list_cap, "max_handles_per_list")
            changes = []
            load = self.load
            for _ in range(n):
                key_group = self.i32("change key group")
                at_l = self.base + self.pos
                length = self.i32("change length")
                changes.append(StateChange(key_group, self.inline(length, "changelog change", at_l, load)))
            handle_id = self.utf("state handle id")
            return InMemoryChangelogHandle(start, num, seq_from, seq_to, tuple(changes), handle_id)
        if tag == T.CHANGELOG_FILE_INCREMENT_HANDLE_V2 or tag == T.CHANGELOG_FILE_INCREMENT_HANDLE:
            start, num = self._kg_range("changelog file handle")
            at_n = self.base + self.pos
            n = self.entries(self.i32("number of changelog file handles"), 9, "number of changelog file handles",
                             at_n, self.list_cap, "max_handles_per_list")
            entries = []
            for _ in range(n):
                offset = self.i64("changelog offset")
                entries.append(ChangelogEntry(offset, self._stream(depth + 1)))
            state_size = self.i64("state size")
            checkpointed_size = self.i64("checkpointed size")
            handle_id = self.utf("state handle id")
            storage = self.utf("storage identifier") if tag == T.CHANGELOG_FILE_INCREMENT_HANDLE_V2 else None
            return ChangelogFileHandle(
                tag, start, num, tuple(entries), state_size, checkpointed_size, handle_id, storage,
            )
        raise self._bad_tag(at, tag, "keyed-state")

    def _named_list(self, what: str, depth: int) -> tuple:
        """SharedList/PrivateList: (local name, stream handle) pairs; the hottest loop.

        Buffer and position live in locals; the common entry (ASCII name + tag-2 file handle with
        an ASCII path, all buffered) is decoded inline, anything else goes through the
        field-by-field path.
        """
        at = self.base + self.pos
        n = self.entries(self.i32(f"number of {what} entries"), 3, f"number of {what} entries", at,
                         self.list_cap, "max_handles_per_list")
        out = []
        append = out.append
        H = _H
        qH = _qH
        FH = FileHandle
        NH = NamedHandle
        new = _new
        fh_path = _FH_path
        fh_size = _FH_size
        nh_name = _NH_name
        nh_handle = _NH_handle
        intern = sys.intern
        window = _WINDOW
        for _ in range(n):
            buf = self.buf
            pos = self.pos
            end = len(buf)
            if end - pos < window:
                self._fill(window)
                buf = self.buf
                pos = self.pos
                end = len(buf)
            if pos + 2 <= end:
                s = pos + 2
                e = s + H(buf, pos)[0]
                if e + 11 <= end and buf[e] == 2:
                    size, pl = qH(buf, e + 1)
                    s2 = e + 11
                    stop = s2 + pl
                    if stop <= end:
                        raw = buf[s:e]
                        praw = buf[s2:stop]
                        if raw.isascii() and praw.isascii() and b"\x00" not in raw and b"\x00" not in praw:
                            self.pos = stop
                            fh = new(FH)
                            fh_path(fh, praw.decode("ascii"))
                            fh_size(fh, size)
                            nh = new(NH)
                            nh_name(nh, intern(raw.decode("ascii")))
                            nh_handle(nh, fh)
                            append(nh)
                            continue
            # RocksDB numbers files per instance, so the same local names recur in every subtask:
            # interning them saves ~10% of a large model.
            name = sys.intern(self.utf(f"{what} local name"))
            append(NH(name, self._stream(depth)))
        return tuple(out)

    # ------------------------------------------------------------------ stream handles

    def _stream(self, depth: int):
        buf = self.buf
        pos = self.pos
        end = len(buf)
        if end - pos < _WINDOW:
            self._fill(_WINDOW)
            buf = self.buf
            pos = self.pos
            end = len(buf)
        if pos >= end:
            raise self._truncated("stream handle tag", 1)
        tag = buf[pos]
        if tag == 2:
            if pos + 11 <= end:
                size, n = _qH(buf, pos + 1)
                s = pos + 11
                e = s + n
                if e <= end:
                    raw = buf[s:e]
                    self.pos = e
                    fh = _new(FileHandle)
                    _FH_path(fh, raw.decode("ascii") if raw.isascii() and b"\x00" not in raw
                             else self._decode(raw, s, "file path"))
                    _FH_size(fh, size)
                    return fh
            self.pos = pos + 1
            size = self.i64("file handle size")
            return FileHandle(self.utf("file handle path"), size)
        if tag == 6:
            if self.max_tag < 6:
                raise self._too_new(self.base + pos, tag)
            if pos + 3 <= end:
                s = pos + 3
                e = s + _H(buf, pos + 1)[0]
                if e + 8 <= end:
                    raw = buf[s:e]
                    (size,) = _q(buf, e)
                    self.pos = e + 8
                    return RelativeFileHandle(
                        raw.decode("ascii") if raw.isascii() and b"\x00" not in raw
                        else self._decode(raw, s, "relative path"), size)
            self.pos = pos + 1
            rel = self.utf("relative file path")
            return RelativeFileHandle(rel, self.i64("relative file size"))
        if tag == 1:
            if pos + 3 <= end:
                s = pos + 3
                e = s + _H(buf, pos + 1)[0]
                if e + 4 <= end:
                    raw = buf[s:e]
                    (n,) = _i(buf, e)
                    self.pos = e + 4
                    name = (raw.decode("ascii") if raw.isascii() and b"\x00" not in raw
                            else self._decode(raw, s, "byte stream handle name"))
                    return ByteStreamHandle(name, self.inline(n, "inline state", self.base + e, self.load))
            self.pos = pos + 1
            name = self.utf("byte stream handle name")
            at = self.base + self.pos
            n = self.i32("inline state length")
            return ByteStreamHandle(name, self.inline(n, "inline state", at, self.load))
        if tag == 0:
            self.pos = pos + 1
            return None
        if tag == 15 or tag == 16:
            if self.max_tag < 15:
                raise self._too_new(self.base + pos, tag)
            self.pos = pos + 1
            if tag == 16:
                return EMPTY_SEGMENT
            at = self.base + pos
            start_pos = self.i64("segment start position")
            size = self.i64("segment size")
            at_scope = self.base + self.pos
            scope = self.i32("segment scope")
            if scope != 0 and scope != 1:
                raise self._corrupt(at_scope, f"segment scope ordinal {scope}, expected 0 (EXCLUSIVE) or 1 (SHARED)")
            path = self.utf("segment physical path")
            return SegmentFileHandle(start_pos, size, scope, path, self.utf("segment logical file id"))
        if tag == 3:
            at = self.base + pos
            if depth > MAX_NESTING:
                raise self._corrupt(at, f"stream handles nested deeper than {MAX_NESTING}")
            self.pos = pos + 1
            start, num = self._kg_range("nested key-groups handle")
            self.count(num, 8, "number of key groups", at + 5)
            raw = self._take(8 * num) if num else b""
            return KeyGroupsHandle(3, start, num, raw, self._stream(depth + 1), None)
        raise self._bad_tag(self.base + pos, tag, "stream")

    # ------------------------------------------------------------------ channel state

    def _channels(self, output: bool) -> tuple:
        what = "output channel states" if output else "input channel states"
        at = self.base + self.pos
        v6 = self.version >= 6
        n = self.entries(self.i32(f"number of {what}"), 18 if v6 else 25, f"number of {what}", at,
                         self.list_cap, "max_handles_per_list")
        if not n:
            return ()
        out = []
        plain = T.CHANNEL_OUTPUT if output else T.CHANNEL_INPUT
        merged = T.CHANNEL_MERGED_OUTPUT if output else T.CHANNEL_MERGED_INPUT
        for _ in range(n):
            if v6:
                at_t = self.base + self.pos
                kind = self.u8("channel state type")
                if kind == merged:
                    out.append(self._merged_channel(output))
                    continue
                if kind != plain:
                    raise self._corrupt(
                        at_t, f"channel state type {kind} not valid in {what} (expected {plain} or {merged})"
                    )
            subtask_index = self.i32("channel subtask index")
            a = self.i32("channel info")
            b = self.i32("channel info")
            offs = self.offsets("channel offsets")
            size = self.i64("channel state size")
            out.append(ChannelStateHandle(output, subtask_index, (a, b), offs, size, self._stream(0)))
        return tuple(out)

    def _merged_channel(self, output: bool) -> MergedChannelStateHandle:
        subtask_index = self.i32("merged channel subtask index")
        size = self.i64("merged channel state size")
        delegate = self._stream(0)
        at = self.base + self.pos
        n = self.i32("merged channel blob length")
        blob = self.inline(n, "merged channel blob", at, self.load or 0 <= n <= SMALL_BLOB)
        return MergedChannelStateHandle(output, subtask_index, size, delegate, blob)


def read_metadata(source: Any, uri: Optional[str] = None, *, load_inline: bool = False,
                  limits: Optional[MetadataLimits] = None) -> CheckpointMetadata:
    """Parse a `_metadata` file from a path-like or a seekable binary source.

    `uri` names the object in errors and in the model (defaults to the path). With
    `load_inline=False` inline payloads are recorded as (offset, length) and not read. `limits`
    replaces the default caps on declared counts (format/limits.py); a file beyond one raises
    MetadataLimitError.
    """
    if uri is None:
        uri = str(source) if not hasattr(source, "read") else getattr(source, "name", "<stream>")
    # Parsing allocates millions of acyclic objects for big files; the cyclic GC would rescan the
    # growing heap over and over (≈40% of parse time) while it can free nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with opened(source) as src:
            size = source_size(src)
            if src.tell():
                src.seek(0)
            return _Reader(src, str(uri), size, load_inline, limits or DEFAULT_LIMITS).parse()
    except RecursionError:
        raise CorruptMetadataError(str(uri), None, "handles nested too deeply") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def open_metadata(path_or_uri: Any, *, load_inline: bool = False,
                  limits: Optional[MetadataLimits] = None) -> CheckpointMetadata:
    """Local convenience: parse a `_metadata` file, or the `_metadata` inside a snapshot directory."""
    import os

    path = os.fspath(path_or_uri)
    if path.startswith("file:"):
        from statekeeper.uri import normalize_uri

        path = normalize_uri(path)[len("file://"):]
    if os.path.isdir(path):
        path = os.path.join(path, "_metadata")
    return read_metadata(path, os.path.abspath(path), load_inline=load_inline, limits=limits)
