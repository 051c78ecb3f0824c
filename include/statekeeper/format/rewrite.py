"""Model edits used by relocation (DR copy) and compaction (moving inline state out).

Both functions are pure: they return a new model (dataclasses.replace) plus a report, and never
touch storage. The caller copies/writes files first and the new `_metadata` last (spec §8.3).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from statekeeper.errors import StatekeeperError
from statekeeper.uri import flink_path_uri, join_uri, normalize_uri, parent_uri, resolve_relative

from . import tags as T
from .model import (
    ByteStreamHandle,
    CheckpointMetadata,
    FileHandle,
    FileMergingOperatorHandle,
    InlineBytes,
    RelativeFileHandle,
    SegmentFileHandle,
)
from .walk import Site, transform


class RewriteError(StatekeeperError):
    """An edit cannot be applied safely (bad mapping, version cannot hold the result, ...)."""


# --------------------------------------------------------------------------- prefix rewrite


@dataclass(frozen=True, slots=True)
class PathChange:
    old: str
    new: str
    handle_kind: str
    occurrences: int


@dataclass(frozen=True)
class RewriteResult:
    model: CheckpointMetadata
    changes: list[PathChange] = field(default_factory=list)  # distinct stored strings rewritten
    unmapped: list[str] = field(default_factory=list)  # absolute locations no prefix matched

    @property
    def changed(self) -> bool:
        return bool(self.changes)


class _PrefixMap:
    """Longest-prefix match on whole path segments of normalized URIs."""

    def __init__(self, mapping: dict[str, str]):
        if not mapping:
            raise RewriteError("empty prefix mapping")
        self.entries: list[tuple[str, str]] = []
        for old, new in mapping.items():
            try:
                # Stored paths are matched as Flink resolves them, so the source prefix is too.
                key = flink_path_uri(old)
                normalize_uri(new)
            except ValueError as exc:
                raise RewriteError(f"mapping {old!r} -> {new!r} is not between absolute URIs: {exc}") from None
            self.entries.append((key.rstrip("/"), new.rstrip("/")))
        # longest first, so the most specific prefix wins
        self.entries.sort(key=lambda e: -len(e[0]))
        self.cache: dict[str, Optional[str]] = {}

    def map(self, stored: str) -> Optional[str]:
        if stored in self.cache:
            return self.cache[stored]
        try:
            norm = flink_path_uri(stored)
        except ValueError as exc:
            raise RewriteError(f"stored location {stored!r} is not an absolute URI: {exc}") from None
        result = None
        for key, target in self.entries:
            if norm == key:
                result = target
                break
            if norm.startswith(key + "/"):
                result = target + norm[len(key):]
                break
        self.cache[stored] = result
        return result


def rewrite_prefixes(model: CheckpointMetadata, mapping: dict[str, str]) -> RewriteResult:
    """Rewrite every absolute location (tags 2 and 15, both tag-17 directories, DSTL handles and
    channel delegates included) by longest-prefix match; relative names, ids, offsets, sizes,
    order, version and trailer stay untouched.

    Matching compares normalized URIs (scheme aliases, duplicate slashes), whole segments only;
    the replacement keeps the spelling of the mapping's target (its scheme is what the target
    cluster has a file system for). Locations no prefix matches are listed in `unmapped`.
    """
    pm = _PrefixMap(mapping)
    changes: dict[tuple[str, str], list] = {}
    unmapped: dict[str, None] = {}

    def sub(stored: str, kind: str) -> str:
        new = pm.map(stored)
        if new is None:
            unmapped[stored] = None
            return stored
        if new != stored:
            rec = changes.get((stored, kind))
            if rec is None:
                changes[(stored, kind)] = [new, 1]
            else:
                rec[1] += 1
        return new

    def visit(site: Site, role: str, local_name, node):
        t = type(node)
        if t is FileHandle:
            new = sub(node.path, "FILE_STREAM_STATE_HANDLE")
            return node if new == node.path else FileHandle(new, node.size)
        if t is SegmentFileHandle:
            new = sub(node.physical_path, "SEGMENT_FILE_HANDLE")
            if new == node.physical_path:
                return node
            return SegmentFileHandle(node.start_pos, node.size, node.scope, new, node.logical_file_id)
        if t is FileMergingOperatorHandle:
            kind = "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE"
            a = sub(node.task_owned_dir, kind)
            b = sub(node.shared_dir, kind)
            if a == node.task_owned_dir and b == node.shared_dir:
                return node
            return FileMergingOperatorHandle(node.states, a, b, node.is_empty, node.delegate)
        return node

    new_model = transform(model, visit)
    return RewriteResult(
        model=new_model,
        changes=[PathChange(old, v[0], kind, v[1]) for (old, kind), v in changes.items()],
        unmapped=list(unmapped),
    )


# --------------------------------------------------------------------------- absolutize relative


def absolutize_relative(model: CheckpointMetadata, metadata_uri: str) -> RewriteResult:
    """Turn every relative (tag 6) handle into an absolute (tag 2) one naming the same file, as Flink
    resolves it beside `metadata_uri`. Needed before a `_metadata` is written anywhere but beside its
    files (compaction into a new directory): a relative name would resolve beside the new file.
    Sizes, order, version and everything else stay; tag 2 exists in every version."""
    snapshot_dir = parent_uri(normalize_uri(metadata_uri))
    changes: dict[str, list] = {}

    def visit(site: Site, role: str, local_name, node):
        if type(node) is not RelativeFileHandle:
            return node
        uri = resolve_relative(snapshot_dir, node.relative_path)
        rec = changes.setdefault(node.relative_path, [uri, 0])
        rec[1] += 1
        return FileHandle(uri, node.size)

    new_model = transform(model, visit)
    return RewriteResult(model=new_model,
                         changes=[PathChange(old, v[0], "RELATIVE_STREAM_STATE_HANDLE", v[1])
                                  for old, v in changes.items()])


# --------------------------------------------------------------------------- externalize inline


@dataclass(frozen=True, slots=True)
class ExternalFile:
    """A file the caller must write before the new `_metadata`: `payload` bytes (stream them
    with payload.iter_chunks(source) from the original `_metadata`) to `uri`."""

    name: str  # file name (the tag-6 relative path, or the last segment of the tag-2 path)
    uri: str  # absolute target URI
    payload: InlineBytes
    absolute: bool  # True: referenced by a tag-2 handle; False: tag 6 beside `_metadata`
    operator_id: Optional[str]
    subtask: Optional[int]
    slot: str
    role: str


@dataclass(frozen=True)
class ExternalizeResult:
    model: CheckpointMetadata
    files: list[ExternalFile] = field(default_factory=list)
    kept_inline: int = 0  # inline handles left alone (too small, filtered, or must stay inline)

    @property
    def externalized_bytes(self) -> int:
        return sum(f.payload.length for f in self.files)


_ABSOLUTE_ROLES = ("shared", "delta")
NameFn = Callable[[Site, str, ByteStreamHandle], str]


def _default_name(site: Site, role: str, handle: ByteStreamHandle) -> str:
    return str(uuid.uuid4())


def externalize_inline(
    model: CheckpointMetadata,
    metadata_uri: str,
    *,
    min_bytes: int = 0,
    operators: Optional[Iterable[str]] = None,
    shared_dir: Optional[str] = None,
    name_fn: NameFn = _default_name,
) -> ExternalizeResult:
    """Replace inline (tag 1) handles by file handles (spec §9).

    * Exclusive state (operator state, key groups, channel state, RocksDB meta and private files)
      becomes a tag-6 relative handle: the file sits beside `metadata_uri`.
    * Entries of an incremental SharedList (and DSTL positions) become tag-2 absolute handles
      under `shared_dir` (default: the snapshot directory), because a restored job may reuse them
      in later checkpoints, which a relative handle would break (FLINK-39964).
    * Coordinator state, master state and tag-9 changelog deltas always stay inline.
    Only payloads of at least `min_bytes`, and only of `operators` (ids) if given, are moved.
    The version is never raised; tag 6 needs a V3+ file.
    """
    meta_uri = normalize_uri(metadata_uri)
    snapshot_dir = parent_uri(meta_uri)
    abs_dir = normalize_uri(shared_dir) if shared_dir else snapshot_dir
    wanted = set(operators) if operators is not None else None
    files: list[ExternalFile] = []
    names: set[str] = set()
    kept = 0

    def visit(site: Site, role: str, local_name, node):
        nonlocal kept
        if type(node) is not ByteStreamHandle:
            return node
        if site.slot in ("coordinator", "master"):
            kept += 1
            return node
        op_id = site.operator.operator_id if site.operator is not None else None
        if node.payload.length < min_bytes or (wanted is not None and op_id not in wanted):
            kept += 1
            return node
        name = name_fn(site, role, node)
        if not name or "/" in name or name in (".", "..", "_metadata") or name in names:
            raise RewriteError(f"invalid or duplicate external file name {name!r}")
        names.add(name)
        absolute = role in _ABSOLUTE_ROLES
        if absolute:
            uri = join_uri(abs_dir, name)
            new = FileHandle(uri, node.payload.length)
        else:
            if not new_tags_allowed(model, T.RELATIVE_STREAM_STATE_HANDLE):
                raise RewriteError(
                    f"V{model.version} files cannot hold relative file handles (tag 6 needs V3+)"
                )
            uri = join_uri(snapshot_dir, name)
            new = RelativeFileHandle(name, node.payload.length)
        files.append(ExternalFile(
            name, uri, node.payload, absolute, op_id, site.subtask, site.slot, role,
        ))
        return new

    new_model = transform(model, visit)
    return ExternalizeResult(model=new_model, files=files, kept_inline=kept)


def new_tags_allowed(model: CheckpointMetadata, tag: int) -> bool:
    """Whether an edit may introduce `tag` into this file without making it unreadable for the
    oldest Flink release that writes the file's version (spec §1.2, §4.1)."""
    return T.TAG_MIN_RELEASE[tag] <= T.VERSION_MIN_RELEASE[model.version]
