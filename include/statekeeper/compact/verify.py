"""A compacted `_metadata` checked against its source before anything depends on it.

Three checks, each fatal on its own:

1. References: the candidate, resolved where it will be installed, names exactly the source's
   files and directories plus the new files, and no new file was already referenced.
2. Structure: walking both models in the same order, every handle is the source's own except where
   an inline payload became one of the new files (or, in a new directory, a relative name became the
   same file's absolute name). Putting the source's handles back into the candidate gives a model
   equal to the source: nothing else (ids, key-group offsets, properties, trailer) changed.
3. Payloads: each new file holds its inline payload byte for byte (streamed, never whole).
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from statekeeper.errors import StatekeeperError
from statekeeper.format import (
    ByteStreamHandle,
    CheckpointMetadata,
    FileHandle,
    FileMergingOperatorHandle,
    InlineBytes,
    MergedChannelStateHandle,
    RelativeFileHandle,
    extract_references,
    transform,
)
from statekeeper.uri import flink_path_uri, parent_uri, resolve_relative

_CHUNK = 1 << 20


class CompactionVerifyError(StatekeeperError):
    """The candidate differs from its source in a way compaction must not cause; it is not installed."""


@dataclass(frozen=True)
class Verified:
    references: int          # distinct files and directories the candidate names
    payloads: int            # moved payloads compared byte for byte
    payload_bytes: int


def referenced(model: CheckpointMetadata, metadata_uri: str) -> set[str]:
    """Distinct URIs (files, segment files and managed directories) `model` names from `metadata_uri`."""
    return {f.uri for f in extract_references(model, metadata_uri).files}


def verify_candidate(source: CheckpointMetadata, source_uri: str, source_stream: Any, candidate: CheckpointMetadata,
                     candidate_stream: Any, result_uri: str, new_files: frozenset[str],
                     open_file: Callable[[str], BinaryIO],
                     payload_digests: dict[tuple[int, int], bytes] | None = None, in_flight: int = 1) -> Verified:
    """Raise CompactionVerifyError unless `candidate` (parsed from `candidate_stream`, the bytes to
    install at `result_uri`) is `source` (parsed from `source_stream`) with inline payloads moved to
    `new_files` and nothing else changed; `open_file` opens a new file for reading. Payloads that
    stayed inline are compared by content (their offsets differ between the two files).
    `payload_digests` (source (offset, length) -> SHA-256, taken while the payloads were written) saves
    reading the moved payloads from the source a second time."""
    old_refs = referenced(source, source_uri)
    new_refs = referenced(candidate, result_uri)
    reused = sorted(new_files & old_refs)
    if reused:
        raise CompactionVerifyError(f"{result_uri}: new file(s) already referenced by the source: {reused[:3]}")
    expected = old_refs | new_files
    if new_refs != expected:
        missing, extra = sorted(expected - new_refs), sorted(new_refs - expected)
        raise CompactionVerifyError(
            f"{result_uri} does not name the source's references plus the new files: "
            f"{len(missing)} missing (e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})")

    source_dir, result_dir = parent_uri(source_uri), parent_uri(result_uri)
    olds: list[Any] = []
    transform(source, lambda site, role, name, node: olds.append(node) or node)
    it: Iterator[Any] = iter(olds)
    moved: list[tuple[ByteStreamHandle, str]] = []
    position = 0

    def put_back(site: Any, role: str, name: Any, node: Any) -> Any:
        nonlocal position
        position += 1
        old = next(it, None)
        if old is None:
            raise CompactionVerifyError(f"{result_uri} has more handles than {source_uri} (at #{position})")
        if type(node) in _CONTAINERS and type(old) is type(node):
            # Visited before their delegate: compare all but the delegate, keep the candidate's delegate
            # so that the walk checks it next against the source's.
            if _form(dataclasses.replace(old, delegate=None), source_stream) == \
                    _form(dataclasses.replace(node, delegate=None), candidate_stream):
                return dataclasses.replace(old, delegate=node.delegate)
        elif _form(old, source_stream) == _form(node, candidate_stream):
            return old
        where = (f"operator {site.operator.operator_id if site.operator is not None else '-'}, subtask "
                 f"{site.subtask}, {site.slot}/{role} (handle #{position})")
        if type(old) is ByteStreamHandle:
            uri = _file_uri(node, result_dir)
            if uri is None or uri not in new_files:
                raise CompactionVerifyError(f"{result_uri}: inline state at {where} became {node!r}, not a new file")
            if _size(node) != old.payload.length:
                raise CompactionVerifyError(f"{result_uri}: {uri} states {_size(node)} bytes for an inline payload "
                                            f"of {old.payload.length} at {where}")
            moved.append((old, uri))
            return old
        if type(old) is RelativeFileHandle and type(node) is FileHandle:
            if (flink_path_uri(node.path) == resolve_relative(source_dir, old.relative_path)
                    and node.size == old.size):
                return old
        raise CompactionVerifyError(f"{result_uri}: the handle at {where} changed: {old!r} -> {node!r}")

    rebuilt = transform(candidate, put_back)
    if next(it, None) is not None:
        raise CompactionVerifyError(f"{result_uri} has fewer handles than {source_uri}")
    if rebuilt != source:
        raise CompactionVerifyError(f"{result_uri} differs from {source_uri} outside the moved handles "
                                    "(operators, key-group offsets, properties or trailer)")
    if {uri for _, uri in moved} != new_files or len(moved) != len(new_files):
        raise CompactionVerifyError(f"{result_uri}: the new files are not one per moved payload")

    total = 0
    digests = payload_digests or {}
    wanted: list[bytes] = []
    for old, _uri in moved:
        want = digests.get((old.payload.offset, old.payload.length))
        if want is None:
            h = hashlib.sha256()
            for chunk in old.payload.iter_chunks(source_stream, _CHUNK):
                h.update(chunk)
            want = h.digest()
        wanted.append(want)

    def read_back(uri: str) -> tuple[int, bytes]:
        got, n = hashlib.sha256(), 0
        with open_file(uri) as stream:
            while chunk := stream.read(_CHUNK):
                got.update(chunk)
                n += len(chunk)
        return n, got.digest()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="compact-verify") as pool:
        found = list(pool.map(read_back, [uri for _, uri in moved]))
    total = 0
    for (old, uri), want, (n, got) in zip(moved, wanted, found):
        if n != old.payload.length or got != want:
            raise CompactionVerifyError(f"{uri} does not hold its inline payload ({n} bytes read, "
                                        f"{old.payload.length} expected, or the bytes differ)")
        total += n
    return Verified(len(new_refs), len(moved), total)


_CONTAINERS = (FileMergingOperatorHandle, MergedChannelStateHandle)


def _form(value: Any, stream: Any) -> Any:
    """`value` with every inline payload replaced by (length, SHA-256 of its bytes): comparable across
    two files that hold the same payloads at different offsets."""
    if type(value) is InlineBytes:
        digest = hashlib.sha256()
        for chunk in value.iter_chunks(stream, _CHUNK):
            digest.update(chunk)
        return ("inline", value.length, digest.digest())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple(_form(getattr(value, f.name), stream)
                                            for f in dataclasses.fields(value) if f.compare))
    if isinstance(value, (tuple, list)):
        return tuple(_form(v, stream) for v in value)
    return value


def _file_uri(node: Any, directory: str) -> str | None:
    if type(node) is FileHandle:
        return flink_path_uri(node.path)
    if type(node) is RelativeFileHandle:
        return resolve_relative(directory, node.relative_path)
    return None


def _size(node: Any) -> int:
    return node.size
