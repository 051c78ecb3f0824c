"""Serialize a CheckpointMetadata model back to Flink's `_metadata` bytes.

The writer is the exact inverse of the reader: a parsed file written back is byte-identical.
Inline payloads that were not loaded are streamed from `inline_source` (the file they were parsed
from) in bounded chunks, so rewriting a multi-GB file needs little memory. The writer validates
the model against the file's version (it never raises a version, spec §1.1) and refuses what the
version cannot express.
"""
from __future__ import annotations

import struct
from contextlib import contextmanager
from typing import Any, BinaryIO, Optional

from . import mutf8
from . import tags as T
from .errors import MetadataWriteError
from .model import (
    ByteStreamHandle,
    ChangelogFileHandle,
    ChangelogHandle,
    ChannelStateHandle,
    CheckpointMetadata,
    EmptySegmentFileHandle,
    FileHandle,
    FileMergingOperatorHandle,
    IncrementalKeyedHandle,
    InlineBytes,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
    MergedChannelStateHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from .source import COPY_CHUNK, iter_range, opened

_FLUSH = 1 << 20
_i = struct.Struct(">i").pack
_q = struct.Struct(">q").pack
_H = struct.Struct(">H").pack
_b = struct.Struct(">b").pack
_qH = struct.Struct(">qH").pack
_ii = struct.Struct(">ii").pack
_qqi = struct.Struct(">qqi").pack


class _Writer:
    def __init__(self, out: BinaryIO, inline_source: Any, version: int):
        self.out = out
        self.src = inline_source
        self.version = version
        self.max_tag = T.MAX_TAG_FOR_VERSION.get(version, 17)
        self.parts: list[bytes] = []
        self.pending = 0
        self.written = 0

    # ------------------------------------------------------------------ output

    def put(self, b: bytes) -> None:
        self.parts.append(b)
        self.pending += len(b)
        if self.pending >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            data = b"".join(self.parts)
            self.out.write(data)
            self.written += len(data)
            self.parts = []
            self.pending = 0

    def utf(self, s: str, what: str) -> None:
        raw = s.encode("ascii") if s.isascii() and "\x00" not in s else mutf8.encode(s)
        if len(raw) > mutf8.MAX_UTF_BYTES:
            raise MetadataWriteError(f"{what} is {len(raw)} bytes in modified UTF-8; the format allows 65535")
        self.put(_H(len(raw)) + raw)

    def payload(self, p: InlineBytes, what: str) -> None:
        self.put(_i(p.length))
        if p.data is not None:
            if len(p.data) != p.length:
                raise MetadataWriteError(f"{what}: payload has {len(p.data)} bytes but says {p.length}")
            if p.length <= _FLUSH:
                self.put(p.data)
            else:
                self.flush()
                self.out.write(p.data)
                self.written += p.length
            return
        if self.src is None or p.offset < 0:
            raise MetadataWriteError(
                f"{what} ({p.length} bytes at offset {p.offset}) is not loaded: pass the file it was "
                "parsed from as inline_source, or read with load_inline=True"
            )
        if p.length <= COPY_CHUNK:
            self.src.seek(p.offset)
            data = self.src.read(p.length)
            if len(data) != p.length:
                data += b"".join(iter_range(self.src, p.offset + len(data), p.length - len(data)))
            self.put(data)
            return
        self.flush()
        for chunk in iter_range(self.src, p.offset, p.length):
            self.out.write(chunk)
            self.written += len(chunk)

    def tag(self, tag: int) -> None:
        if tag > self.max_tag:
            raise MetadataWriteError(
                f"tag {tag} ({T.tag_name(tag)}) cannot be written into a V{self.version} file: no "
                f"Flink release reading it as such knows the tag (highest: {self.max_tag})"
            )

    # ------------------------------------------------------------------ structure

    def metadata(self, m: CheckpointMetadata) -> None:
        v = m.version
        self.put(_i(T.MAGIC) + _i(v) + _q(m.checkpoint_id))
        self.put(_i(len(m.master_states)))
        for ms in m.master_states:
            raw_name = mutf8.encode(ms.name)
            if len(raw_name) > mutf8.MAX_UTF_BYTES:
                raise MetadataWriteError(f"master state name of {len(raw_name)} bytes is too long")
            record = 4 + 2 + len(raw_name) + 4 + ms.payload.length
            if record > 0x7FFFFFFF:
                raise MetadataWriteError(f"master state {ms.name!r} is larger than 2 GiB")
            self.put(_i(T.MASTER_STATE_MAGIC) + _i(record) + _i(ms.version) + _H(len(raw_name)) + raw_name)
            self.payload(ms.payload, f"master state {ms.name!r}")
        self.put(_i(len(m.operators)))
        for op in m.operators:
            self.operator(op)
        if v >= 4:
            if m.trailer is None:
                raise MetadataWriteError(f"a V{v} file needs its CheckpointProperties trailer")
            self.put(m.trailer)
        elif m.trailer is not None:
            raise MetadataWriteError(f"a V{v} file has no trailer")

    def operator(self, op) -> None:
        v = self.version
        if v >= 5:
            if op.name == "" or op.uid == "":
                raise MetadataWriteError("operator name/uid must be None (absent) or non-empty")
            self.utf(op.name or "", "operator name")
            self.utf(op.uid or "", "operator uid")
        elif op.name is not None or op.uid is not None:
            raise MetadataWriteError(f"operator names/uids need metadata version 5+, file is V{v}")
        try:
            raw_id = bytes.fromhex(op.operator_id)
        except ValueError:
            raw_id = b""
        if len(raw_id) != 16:
            raise MetadataWriteError(f"operator id {op.operator_id!r} is not 32 hex characters")
        self.put(raw_id + _ii(op.parallelism, op.max_parallelism))
        if v == 2:
            if op.coordinator is not None or op.fully_finished:
                raise MetadataWriteError("V2 cannot hold coordinator state or finished operators")
            self.put(_i(1 if op.v2_chain_length is None else op.v2_chain_length))
        else:
            if op.coordinator is not None and not isinstance(op.coordinator, ByteStreamHandle):
                raise MetadataWriteError("coordinator state must be inline (ByteStreamHandle)")
            self.stream(op.coordinator)
            if op.fully_finished:
                if op.coordinator is not None or op.subtasks:
                    raise MetadataWriteError("a fully finished operator has no coordinator or subtask state")
                self.put(_i(-1))
                return
        self.put(_i(len(op.subtasks)))
        for st in op.subtasks:
            if st.finished:
                if v == 2:
                    raise MetadataWriteError("V2 cannot mark finished subtasks")
                self.put(_i(-st.index - 1))
                continue
            self.put(_i(st.index))
            self.subtask(st)

    def subtask(self, st) -> None:
        v = self.version
        if v == 2:
            self.put(_q(-1 if st.v2_duration is None else st.v2_duration) + _i(0))
        for h in (st.managed_operator, st.raw_operator):
            if h is None:
                self.put(_i(0))
            else:
                self.put(_i(1))
                self.op_handle(h)
        self.keyed(st.managed_keyed)
        self.keyed(st.raw_keyed)
        if v == 2:
            if st.input_channels or st.output_channels:
                raise MetadataWriteError("V2 cannot hold channel state")
            return
        self.channels(st.input_channels, False)
        self.channels(st.output_channels, True)

    def op_handle(self, h) -> None:
        if isinstance(h, OperatorStreamHandle):
            tag = T.PARTITIONABLE_OPERATOR_STATE_HANDLE
        elif isinstance(h, FileMergingOperatorHandle):
            tag = T.SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE
        else:
            raise MetadataWriteError(f"not an operator state handle: {type(h).__name__}")
        self.tag(tag)
        self.put(_b(tag) + _i(len(h.states)))
        for s in h.states:
            self.utf(s.name, "operator state name")
            self.put(_b(s.mode) + _i(len(s.offsets_be) // 8) + s.offsets_be)
        if tag == T.SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE:
            if not isinstance(h.delegate, (SegmentFileHandle, EmptySegmentFileHandle)):
                raise MetadataWriteError("file-merging operator state needs a segment delegate")
            self.utf(h.task_owned_dir, "task-owned managed directory")
            self.utf(h.shared_dir, "shared managed directory")
            self.put(b"\x01" if h.is_empty else b"\x00")
        self.stream(h.delegate)

    def keyed(self, h) -> None:
        if h is not None:
            self.tag(h.tag if hasattr(h, "tag") else h.TAG)
        if h is None:
            self.put(b"\x00")
        elif isinstance(h, KeyGroupsHandle):
            if h.tag not in (3, 7, 12):
                raise MetadataWriteError(f"key-groups handle with tag {h.tag}")
            self.key_groups(h)
            if h.tag == T.KEY_GROUPS_HANDLE_V2:
                self.utf(h.handle_id or "", "state handle id")
        elif isinstance(h, IncrementalKeyedHandle):
            v2 = h.tag == T.INCREMENTAL_KEY_GROUPS_HANDLE_V2
            if h.tag not in (5, 11):
                raise MetadataWriteError(f"incremental handle with tag {h.tag}")
            self.put(_b(h.tag) + _q(h.checkpoint_id))
            self.utf(h.backend_id, "backend id")
            self.put(_ii(h.key_group_start, h.num_key_groups))
            if v2:
                self.put(_q(h.checkpointed_size))
            self.stream(h.meta)
            self.named_list(h.shared)
            self.named_list(h.private)
            if v2:
                self.utf(h.handle_id or "", "state handle id")
        elif isinstance(h, ChangelogHandle):
            if h.tag not in (8, 14):
                raise MetadataWriteError(f"changelog handle with tag {h.tag}")
            self.put(_b(h.tag) + _ii(h.key_group_start, h.num_key_groups) + _q(h.checkpointed_size))
            self.put(_i(len(h.materialized)))
            for k in h.materialized:
                self.keyed(k)
            self.put(_i(len(h.deltas)))
            for k in h.deltas:
                if not isinstance(k, (InMemoryChangelogHandle, ChangelogFileHandle)):
                    raise MetadataWriteError("changelog deltas must be changelog handles (tag 9/10/13)")
                self.keyed(k)
            self.put(_q(h.materialization_id))
            if h.tag == T.CHANGELOG_HANDLE_V2:
                self.put(_q(h.checkpoint_id))
            self.utf(h.handle_id, "state handle id")
        elif isinstance(h, InMemoryChangelogHandle):
            self.put(
                _b(9) + _ii(h.key_group_start, h.num_key_groups) + _q(h.sequence_from)
                + _q(h.sequence_to) + _i(len(h.changes))
            )
            for c in h.changes:
                self.put(_i(c.key_group))
                self.payload(c.payload, "changelog change")
            self.utf(h.handle_id, "state handle id")
        elif isinstance(h, ChangelogFileHandle):
            if h.tag not in (10, 13):
                raise MetadataWriteError(f"changelog file handle with tag {h.tag}")
            self.put(_b(h.tag) + _ii(h.key_group_start, h.num_key_groups) + _i(len(h.entries)))
            for e in h.entries:
                self.put(_q(e.offset))
                self.stream(e.handle)
            self.put(_q(h.state_size) + _q(h.checkpointed_size))
            self.utf(h.handle_id, "state handle id")
            if h.tag == T.CHANGELOG_FILE_INCREMENT_HANDLE_V2:
                self.utf(h.storage_identifier or "", "storage identifier")
        else:
            raise MetadataWriteError(f"not a keyed state handle: {type(h).__name__}")

    def key_groups(self, h: KeyGroupsHandle) -> None:
        if len(h.offsets_be) != 8 * h.num_key_groups:
            raise MetadataWriteError(
                f"key-groups handle has {len(h.offsets_be) // 8} offsets for {h.num_key_groups} key groups"
            )
        self.put(_b(h.tag) + _ii(h.key_group_start, h.num_key_groups) + h.offsets_be)
        self.stream(h.delegate)

    def named_list(self, entries) -> None:
        put = self.put
        put(_i(len(entries)))
        for e in entries:
            self.utf(e.local_name, "local file name")
            h = e.handle
            if type(h) is FileHandle:
                raw = h.path.encode("ascii") if h.path.isascii() and "\x00" not in h.path else mutf8.encode(h.path)
                if len(raw) > mutf8.MAX_UTF_BYTES:
                    raise MetadataWriteError(f"path of {len(raw)} bytes is too long")
                put(b"\x02" + _qH(h.size, len(raw)) + raw)
            else:
                self.stream(h)

    def stream(self, h) -> None:
        t = type(h)
        if h is None:
            self.put(b"\x00")
        elif t is FileHandle:
            self.put(b"\x02" + _q(h.size))
            self.utf(h.path, "file path")
        elif t is RelativeFileHandle:
            self.tag(6)
            self.put(b"\x06")
            self.utf(h.relative_path, "relative path")
            self.put(_q(h.size))
        elif t is ByteStreamHandle:
            self.put(b"\x01")
            self.utf(h.name, "byte stream handle name")
            self.payload(h.payload, f"inline state {h.name!r}")
        elif t is SegmentFileHandle:
            self.tag(15)
            if h.scope not in (0, 1):
                raise MetadataWriteError(f"segment scope {h.scope}")
            self.put(b"\x0f" + _qqi(h.start_pos, h.size, h.scope))
            self.utf(h.physical_path, "segment physical path")
            self.utf(h.logical_file_id, "segment logical file id")
        elif t is EmptySegmentFileHandle:
            self.tag(16)
            self.put(b"\x10")
        elif t is KeyGroupsHandle:
            if h.tag != T.KEY_GROUPS_HANDLE:
                raise MetadataWriteError(f"only tag-3 key-groups handles can sit in a stream position, got tag {h.tag}")
            self.key_groups(h)
        else:
            raise MetadataWriteError(f"not a stream state handle: {type(h).__name__}")

    def channels(self, handles, output: bool) -> None:
        v6 = self.version >= 6
        self.put(_i(len(handles)))
        for h in handles:
            if h.output != output:
                raise MetadataWriteError("output channel handle in an input list or vice versa")
            if isinstance(h, MergedChannelStateHandle):
                if not v6:
                    raise MetadataWriteError(f"merged channel state needs metadata version 6, file is V{self.version}")
                self.put(_b(T.CHANNEL_MERGED_OUTPUT if output else T.CHANNEL_MERGED_INPUT))
                self.put(_i(h.subtask_index) + _q(h.state_size))
                self.stream(h.delegate)
                self.payload(h.blob, "merged channel blob")
            elif isinstance(h, ChannelStateHandle):
                if v6:
                    self.put(_b(T.CHANNEL_OUTPUT if output else T.CHANNEL_INPUT))
                self.put(
                    _i(h.subtask_index) + _ii(h.info[0], h.info[1]) + _i(len(h.offsets_be) // 8)
                    + h.offsets_be + _q(h.state_size)
                )
                self.stream(h.delegate)
            else:
                raise MetadataWriteError(f"not a channel state handle: {type(h).__name__}")


def write_metadata(model: CheckpointMetadata, out: BinaryIO, *, inline_source: Any = None) -> int:
    """Serialize `model` to the binary stream `out`; returns the number of bytes written.

    `inline_source` (path or seekable binary source) supplies payloads that were not loaded,
    normally the `_metadata` the model was read from.
    """
    if model.version not in T.SUPPORTED_VERSIONS:
        raise MetadataWriteError(f"cannot write metadata version {model.version}")
    if model.checkpoint_id < 0:
        raise MetadataWriteError(f"invalid checkpoint id {model.checkpoint_id}")
    with opened(inline_source) if inline_source is not None else _none() as src:
        w = _Writer(out, src, model.version)
        try:
            w.metadata(model)
        except struct.error as exc:
            raise MetadataWriteError(f"a value does not fit its field: {exc}") from None
        w.flush()
        return w.written


@contextmanager
def _none():
    yield None


def to_bytes(model: CheckpointMetadata, *, inline_source: Optional[Any] = None) -> bytes:
    """Serialize to memory (tests and small files)."""
    import io

    buf = io.BytesIO()
    write_metadata(model, buf, inline_source=inline_source)
    return buf.getvalue()
