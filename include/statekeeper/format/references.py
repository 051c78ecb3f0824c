"""Reference extraction: every file (or segment, or managed directory) a `_metadata` points at.

Used by the index (`references` table), integrity validation, GC marking and relocation. Stored
paths are resolved exactly as Flink's `Path` resolves them (`statekeeper.uri.flink_path_uri`), in
the canonical spelling storage listings use, so a reference equals a listed object exactly when
Flink would open that object; relative handles (tag 6) resolve against the directory holding
`_metadata` (spec §8.1). Nothing is percent-decoded: Flink stores paths unencoded.

Scope (who owns the file, spec §5-§6):
* ``exclusive``  - inside this snapshot's own directory, or private state outside it (entropy)
* ``shared``     - under a ``shared/`` directory, or in a SharedList/PrivateList or DSTL position
* ``task_owned`` - under a ``taskowned/`` directory
* ``file_merging_managed_dir`` - a directory named by a tag-17 handle (uri is a directory)
Inline state is reported separately (InlineState), never as a file. V6 merged-channel offset
blobs are not state and are counted only by statekeeper.format.accounting.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any, Optional

from statekeeper.uri import flink_path_uri, normalize_uri, parent_uri, resolve_relative

from . import tags as T
from .errors import CorruptMetadataError
from .model import (
    ByteStreamHandle,
    CheckpointMetadata,
    FileHandle,
    FileMergingOperatorHandle,
    InMemoryChangelogHandle,
    MasterState,
    RelativeFileHandle,
    SegmentFileHandle,
)
from .walk import transform

EXCLUSIVE = "exclusive"
SHARED = "shared"
TASK_OWNED = "task_owned"
MANAGED_DIR = "file_merging_managed_dir"


class UnresolvableReferenceError(CorruptMetadataError):
    """A stored path cannot be turned into an absolute URI."""


@dataclass(frozen=True, slots=True)
class FileReference:
    uri: str  # normalized absolute URI (a directory for scope file_merging_managed_dir)
    stored_path: str  # exactly as stored in the file (relative name for tag 6)
    handle_kind: str  # tag name of the handle naming the file
    scope: str
    stated_size: Optional[int]  # size stated by the handle (segment length for segments)
    segment_start: Optional[int]  # segments only
    segment_length: Optional[int]  # segments only
    operator_id: Optional[str]
    operator_name: Optional[str]
    operator_uid: Optional[str]
    subtask: Optional[int]  # None for operator-level (coordinator) positions
    slot: str
    role: str
    local_name: Optional[str]  # RocksDB/ForSt file name for SharedList/PrivateList entries


@dataclass(frozen=True, slots=True)
class InlineState:
    """Inline bytes aggregated per (operator, subtask, slot, role, handle kind)."""

    operator_id: Optional[str]  # None for master state
    operator_name: Optional[str]
    operator_uid: Optional[str]
    subtask: Optional[int]
    slot: str
    role: str
    handle_kind: str
    inline_bytes: int
    handle_count: int


@dataclass(frozen=True, slots=True)
class InlineSummary:
    operator_id: Optional[str]
    operator_name: Optional[str]
    operator_uid: Optional[str]
    handle_kind: str
    slot: str
    inline_bytes: int
    handle_count: int


@dataclass(frozen=True)
class MetadataReferences:
    metadata_uri: str
    snapshot_dir: str
    files: list[FileReference] = field(default_factory=list)
    inline: list[InlineState] = field(default_factory=list)

    def physical_files(self) -> dict[str, int]:
        """Distinct referenced files → stated size; a segmented file's size is the end of its
        last referenced segment. Managed directories are not files and are left out."""
        out: dict[str, int] = {}
        for f in self.files:
            if f.scope == MANAGED_DIR:
                continue
            size = f.stated_size if f.segment_start is None else f.segment_start + f.segment_length
            prev = out.get(f.uri)
            if prev is None or size > prev:
                out[f.uri] = size
        return out

    def managed_dirs(self) -> set[str]:
        return {f.uri for f in self.files if f.scope == MANAGED_DIR}

    @property
    def inline_bytes(self) -> int:
        return sum(s.inline_bytes for s in self.inline)

    def inline_summary(self) -> list[InlineSummary]:
        """Inline bytes per operator, slot and handle kind, largest first."""
        agg: dict[tuple, list] = {}
        for s in self.inline:
            key = (s.operator_id, s.operator_name, s.operator_uid, s.handle_kind, s.slot)
            a = agg.setdefault(key, [0, 0])
            a[0] += s.inline_bytes
            a[1] += s.handle_count
        out = [InlineSummary(k[0], k[1], k[2], k[3], k[4], v[0], v[1]) for k, v in agg.items()]
        out.sort(key=lambda s: (-s.inline_bytes, s.operator_id or "", s.handle_kind))
        return out

    def outside_snapshot(self) -> list[FileReference]:
        """References that leave this snapshot's own directory (other jobs' shared/, savepoints)."""
        prefix = self.snapshot_dir.rstrip("/") + "/"
        return [f for f in self.files if not f.uri.startswith(prefix)]


_FR_SETTERS = tuple(getattr(FileReference, f).__set__ for f in FileReference.__dataclass_fields__)
(_s_uri, _s_stored, _s_kind, _s_scope, _s_size, _s_start, _s_len, _s_op, _s_name, _s_uid, _s_sub,
 _s_slot, _s_role, _s_local) = _FR_SETTERS
_new = object.__new__


def _file_ref(uri, stored, kind, scope, size, start, length, op_id, op_name, op_uid, subtask, slot,
              role, local_name) -> FileReference:
    """FileReference(...) without the frozen __init__'s per-field object.__setattr__ (hot path:
    one call per referenced file; see reader.py for the same technique)."""
    r = _new(FileReference)
    _s_uri(r, uri)
    _s_stored(r, stored)
    _s_kind(r, kind)
    _s_scope(r, scope)
    _s_size(r, size)
    _s_start(r, start)
    _s_len(r, length)
    _s_op(r, op_id)
    _s_name(r, op_name)
    _s_uid(r, op_uid)
    _s_sub(r, subtask)
    _s_slot(r, slot)
    _s_role(r, role)
    _s_local(r, local_name)
    return r


def _scope_of(uri: str, snapshot_prefix: str, role: str) -> str:
    if uri.startswith(snapshot_prefix):
        return EXCLUSIVE
    if "/taskowned/" in uri:
        return TASK_OWNED
    if "/shared/" in uri:
        return SHARED
    if role in ("shared", "private", "delta"):
        return SHARED
    return EXCLUSIVE


def extract_references(model: CheckpointMetadata, metadata_uri: str) -> MetadataReferences:
    """All references of `model`, which was read from `metadata_uri` (the `_metadata` object)."""
    collector = _Collector(metadata_uri)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of acyclic records; see reader.read_metadata
    try:
        transform(model, collector.visit)
    finally:
        if gc_was_enabled:
            gc.enable()
    return collector.result()


class _Paths:
    """Stored paths as canonical URIs. Thousands of files share a directory: each directory is
    resolved once and the file name appended, when appending cannot change the result (not '.'/'..',
    no backslash, non-empty)."""

    def __init__(self, metadata_uri: str) -> None:
        self.metadata_uri = metadata_uri
        self.dirs: dict[str, str] = {}

    def uri(self, path: str) -> str:
        head, sep, name = path.rpartition("/")
        if sep and name and name not in (".", "..") and "\\" not in name and head:
            d = self.dirs.get(head)
            if d is None:
                try:
                    d = flink_path_uri(head)
                except ValueError:
                    return self._resolved(path)
                if len(self.dirs) < 100_000:
                    self.dirs[head] = d
            return d + name if d.endswith("/") else d + "/" + name
        return self._resolved(path)

    def _resolved(self, path: str) -> str:
        try:
            return flink_path_uri(path)
        except ValueError as exc:
            raise UnresolvableReferenceError(
                self.metadata_uri, None, f"stored path {path!r} is not an absolute URI: {exc}"
            ) from None


class _Collector:
    """What `transform` visits of one file, as references: a FileReference per file (and per managed
    directory), inline bytes summed per (operator, subtask, slot, role, kind). Hot path: one visit per
    handle of files with ~10^6 of them, so each kind has a method of its own, found by type."""

    def __init__(self, metadata_uri: str) -> None:
        self.metadata_uri = metadata_uri
        self.meta_uri = normalize_uri(metadata_uri)
        self.snapshot_dir = parent_uri(self.meta_uri)
        self.prefix = self.snapshot_dir.rstrip("/") + "/"
        self.files: list[FileReference] = []
        self.inline: dict[tuple, list] = {}
        self.norm = _Paths(metadata_uri).uri
        self._site: Any = None
        self._who: tuple = (None, None, None)
        self._by_type = {
            FileHandle: self._file, RelativeFileHandle: self._relative, ByteStreamHandle: self._inline_handle,
            SegmentFileHandle: self._segment, FileMergingOperatorHandle: self._managed_dirs,
            MasterState: self._master_state, InMemoryChangelogHandle: self._changelog,
        }

    def result(self) -> MetadataReferences:
        inline_list = [
            InlineState(k[0], k[1], k[2], k[3], k[4], k[5], k[6], v[0], v[1]) for k, v in self.inline.items()
        ]
        return MetadataReferences(self.meta_uri, self.snapshot_dir, self.files, inline_list)

    def visit(self, site: Any, role: str, local_name: Any, node: Any) -> Any:
        handle = self._by_type.get(type(node))
        if handle is not None:
            handle(site, role, local_name, node)
        return node

    def who(self, site: Any) -> tuple:
        """(operator id, name, uid) of the site's operator; sites come in runs, so the last is remembered."""
        if site is not self._site:
            op = site.operator
            self._who = (None, None, None) if op is None else (op.operator_id, op.name, op.uid)
            self._site = site
        return self._who

    def _file(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        path = node.path
        uri = self.norm(path)
        op_id, name, uid = self.who(site)
        self.files.append(_file_ref(
            uri, path, "FILE_STREAM_STATE_HANDLE", _scope_of(uri, self.prefix, role),
            node.size, None, None, op_id, name, uid, site.subtask, site.slot, role, local_name,
        ))

    def _relative(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        rel = node.relative_path
        try:
            if rel and "/" not in rel and "\\" not in rel and rel not in (".", ".."):
                uri = self.prefix + rel  # a plain file name: joining cannot change anything else
            else:
                uri = resolve_relative(self.snapshot_dir, rel)
        except ValueError as exc:
            raise UnresolvableReferenceError(
                self.metadata_uri, None, f"relative path {node.relative_path!r} cannot be resolved: {exc}"
            ) from None
        op_id, name, uid = self.who(site)
        self.files.append(FileReference(
            uri, node.relative_path, "RELATIVE_STREAM_STATE_HANDLE", EXCLUSIVE, node.size,
            None, None, op_id, name, uid, site.subtask, site.slot, role, local_name,
        ))

    def _segment(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        uri = self.norm(node.physical_path)
        if uri.startswith(self.prefix):
            scope = EXCLUSIVE
        elif "/taskowned/" in uri:
            scope = TASK_OWNED
        elif "/shared/" in uri or node.scope == 1:
            scope = SHARED
        else:
            scope = _scope_of(uri, self.prefix, role)
        op_id, name, uid = self.who(site)
        self.files.append(FileReference(
            uri, node.physical_path, "SEGMENT_FILE_HANDLE", scope, node.size, node.start_pos,
            node.size, op_id, name, uid, site.subtask, site.slot, role, local_name,
        ))

    def _managed_dirs(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        op_id, name, uid = self.who(site)
        for r, path in (("task_owned_dir", node.task_owned_dir), ("shared_dir", node.shared_dir)):
            if not path:
                raise UnresolvableReferenceError(
                    self.metadata_uri, None, f"file-merging operator state has an empty {r} string"
                )
            self.files.append(FileReference(
                self.norm(path), path, "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE", MANAGED_DIR,
                None, None, None, op_id, name, uid, site.subtask, site.slot, r, None,
            ))

    def _inline_handle(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        self._add_inline(site, role, "BYTE_STREAM_STATE_HANDLE", node.payload.length)

    def _master_state(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        self._add_inline(site, role, T.MASTER_STATE, node.payload.length)

    def _changelog(self, site: Any, role: str, local_name: Any, node: Any) -> None:
        self._add_inline(site, role, "CHANGELOG_BYTE_INCREMENT_HANDLE", sum(c.payload.length for c in node.changes))

    def _add_inline(self, site: Any, role: str, kind: str, nbytes: int, count: int = 1) -> None:
        op_id, name, uid = self.who(site)
        key = (op_id, name, uid, site.subtask, site.slot, role, kind)
        a = self.inline.get(key)
        if a is None:
            self.inline[key] = [nbytes, count]
        else:
            a[0] += nbytes
            a[1] += count
