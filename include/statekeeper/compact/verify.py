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

import bisect
import dataclasses
import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from statekeeper.compact.concurrency import bounded_map
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


class PayloadDigests:
    """SHA-256 of each moved payload by its offset in the source, packed: ~10^5 of them as a dict of
    bytes would cost more memory than the candidate's whole parse."""

    __slots__ = ("_offsets", "_digests")

    def __init__(self, pairs: Iterable[tuple[int, bytes]]):
        ordered = sorted(pairs)
        self._offsets = array("q", (o for o, _ in ordered))
        self._digests = b"".join(d for _, d in ordered)

    def get(self, offset: int) -> bytes | None:
        i = bisect.bisect_left(self._offsets, offset)
        if i < len(self._offsets) and self._offsets[i] == offset:
            return self._digests[32 * i:32 * i + 32]
        return None

    def __len__(self) -> int:
        return len(self._offsets)


class CompactionVerifyError(StatekeeperError):
    """The candidate differs from its source in a way compaction must not cause; it is not installed."""


@dataclass(frozen=True)
class Verified:
    references: int          # distinct files and directories the candidate names
    payloads: int            # moved payloads compared byte for byte
    payload_bytes: int


def iter_references(model: CheckpointMetadata, metadata_uri: str) -> Iterator[str]:
    """The URIs (files, segment files and managed directories) `model` names from `metadata_uri`, with
    repeats: the index's own reading (`extract_references`, what GC keeps files by), one operator at a
    time so that ~10^5 reference records are never alive at once."""
    for f in extract_references(dataclasses.replace(model, operators=()), metadata_uri).files:
        yield f.uri
    for op in model.operators:
        for f in extract_references(dataclasses.replace(model, master_states=(), operators=(op,)), metadata_uri).files:
            yield f.uri


def referenced(model: CheckpointMetadata, metadata_uri: str) -> set[str]:
    """Distinct URIs `model` names from `metadata_uri` (see iter_references)."""
    return set(iter_references(model, metadata_uri))


def verify_candidate(source: CheckpointMetadata, source_uri: str, source_stream: Any, candidate: CheckpointMetadata,
                     candidate_stream: Any, result_uri: str, new_files: frozenset[str],
                     open_file: Callable[[str], BinaryIO],
                     payload_digests: PayloadDigests | None = None, in_flight: int = 1) -> Verified:
    """Raise CompactionVerifyError unless `candidate` (parsed from `candidate_stream`, the bytes to
    install at `result_uri`) is `source` (parsed from `source_stream`) with inline payloads moved to
    `new_files` and nothing else changed; `open_file` opens a new file for reading. Payloads that
    stayed inline are compared by content (their offsets differ between the two files).
    `payload_digests` (source offset of a payload -> SHA-256, taken while the payloads were written) saves
    reading the moved payloads from the source a second time."""
    ordered = list(new_files)
    old_refs = _check_references(source, source_uri, candidate, result_uri, ordered)
    structure = _StructureCheck(source_uri, source_stream, candidate_stream, result_uri, ordered)
    moved = structure.moved_payloads(source, candidate)
    total = _check_payloads(moved, ordered, source_stream, open_file, payload_digests, in_flight)
    return Verified(len(old_refs) + len(ordered), len(moved), total)


def _check_references(source: CheckpointMetadata, source_uri: str, candidate: CheckpointMetadata, result_uri: str,
                      ordered: list[str]) -> set[str]:
    """1. The candidate, resolved where it will be installed, names exactly the source's references plus
    the new files (`ordered`), and no new file was referenced before. The source's references."""
    old_refs = referenced(source, source_uri)
    reused = sorted(set(ordered) & old_refs)
    if reused:
        raise CompactionVerifyError(f"{result_uri}: new file(s) already referenced by the source: {reused[:3]}")
    # What the candidate names, checked off against what it must name: the source's references by set
    # (few), the new files by a bitmap over their index (~10^5: no second set of URIs in memory).
    index = {uri: i for i, uri in enumerate(ordered)}
    seen_new, seen_old, extra = bytearray(len(index)), set(), []
    for uri in iter_references(candidate, result_uri):
        i = index.get(uri)
        if i is not None:
            seen_new[i] = 1
        elif uri in old_refs:
            seen_old.add(uri)
        elif len(extra) < 10:
            extra.append(uri)
    missing = sorted(old_refs - seen_old) + [u for u, i in index.items() if not seen_new[i]][:10]
    if missing or extra:
        raise CompactionVerifyError(
            f"{result_uri} does not name the source's references plus the new files: "
            f"{len(missing)} missing (e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})")
    return old_refs


class _StructureCheck:
    """2. Walking both models in the same order, every handle is the source's own except where an
    inline payload became one of the new files (or, in a new directory, a relative name became the
    same file's absolute name); with the source's handles put back, the candidate equals the source."""

    def __init__(self, source_uri: str, source_stream: Any, candidate_stream: Any, result_uri: str,
                 ordered: list[str]) -> None:
        self.source_uri, self.result_uri = source_uri, result_uri
        self.source_stream, self.candidate_stream = source_stream, candidate_stream
        self.source_dir, self.result_dir = parent_uri(source_uri), parent_uri(result_uri)
        self.ordered = ordered
        self.index = {uri: i for i, uri in enumerate(ordered)}
        self.moved: list[tuple[ByteStreamHandle, int]] = []     # (source handle, index of its new file)
        self.moved_to = bytearray(len(ordered))
        self.position = 0

    def moved_payloads(self, source: CheckpointMetadata, candidate: CheckpointMetadata) -> list[tuple[Any, int]]:
        """Check part by part (file-level fields with master state, then each operator), so that only
        one operator's rebuilt copy is alive at a time (a GB-sized source has ~10^5 handles); the moved
        payloads, each with the index of its new file."""
        if len(candidate.operators) != len(source.operators):
            raise CompactionVerifyError(f"{self.result_uri} has {len(candidate.operators)} operators, "
                                        f"{self.source_uri} {len(source.operators)}")
        self._same(dataclasses.replace(source, operators=()), dataclasses.replace(candidate, operators=()),
                   "the file-level fields and master state")
        for old_op, new_op in zip(source.operators, candidate.operators):
            self._same(dataclasses.replace(source, master_states=(), operators=(old_op,)),
                       dataclasses.replace(candidate, master_states=(), operators=(new_op,)),
                       f"operator {old_op.operator_id}")
        if len(self.moved) != len(self.ordered):     # each named once (checked as it goes), so: every one named
            raise CompactionVerifyError(f"{self.result_uri}: the new files are not one per moved payload")
        return self.moved

    def _same(self, part: CheckpointMetadata, cand_part: CheckpointMetadata, what: str) -> None:
        """Walk one part of both files in the same order; with the source's handles put back into the
        candidate's part, it must equal the source's part."""
        olds: list[Any] = []
        transform(part, lambda site, role, name, node: olds.append(node) or node)
        it: Iterator[Any] = iter(olds)

        def visit(site: Any, role: str, name: Any, node: Any) -> Any:
            self.position += 1
            old = next(it, None)
            if old is None:
                raise CompactionVerifyError(f"{self.result_uri} has more handles than {self.source_uri} in {what}")
            return self._put_back(old, site, role, node)

        rebuilt = transform(cand_part, visit)
        if next(it, None) is not None:
            raise CompactionVerifyError(f"{self.result_uri} has fewer handles than {self.source_uri} in {what}")
        if rebuilt != part:
            raise CompactionVerifyError(f"{self.result_uri} differs from {self.source_uri} outside the moved handles "
                                        f"in {what} (ids, key-group offsets, names or other fields)")

    def _put_back(self, old: Any, site: Any, role: str, node: Any) -> Any:
        """The source's handle `old` where the candidate has `node`, if `node` may stand for it."""
        if type(node) in _CONTAINERS and type(old) is type(node):
            # Visited before their delegate: compare all but the delegate, keep the candidate's delegate
            # so that the walk checks it next against the source's.
            if _form(dataclasses.replace(old, delegate=None), self.source_stream) == \
                    _form(dataclasses.replace(node, delegate=None), self.candidate_stream):
                return dataclasses.replace(old, delegate=node.delegate)
        elif _form(old, self.source_stream) == _form(node, self.candidate_stream):
            return old
        where = (f"operator {site.operator.operator_id if site.operator is not None else '-'}, subtask "
                 f"{site.subtask}, {site.slot}/{role} (handle #{self.position})")
        if type(old) is ByteStreamHandle:
            return self._moved(old, node, where)
        if type(old) is RelativeFileHandle and type(node) is FileHandle:
            if (flink_path_uri(node.path) == resolve_relative(self.source_dir, old.relative_path)
                    and node.size == old.size):
                return old
        raise CompactionVerifyError(f"{self.result_uri}: the handle at {where} changed: {old!r} -> {node!r}")

    def _moved(self, old: ByteStreamHandle, node: Any, where: str) -> ByteStreamHandle:
        """An inline payload the candidate names as a file: one of the new files, named once, of its size."""
        uri = _file_uri(node, self.result_dir)
        i = self.index.get(uri) if uri is not None else None
        if i is None:
            raise CompactionVerifyError(f"{self.result_uri}: inline state at {where} became {node!r}, not a new file")
        if self.moved_to[i]:
            raise CompactionVerifyError(f"{self.result_uri}: {uri} is named for a second payload at {where}")
        if node.size != old.payload.length:
            raise CompactionVerifyError(f"{self.result_uri}: {uri} states {node.size} bytes for an inline payload "
                                        f"of {old.payload.length} at {where}")
        self.moved_to[i] = 1
        self.moved.append((old, i))
        return old


def _check_payloads(moved: list[tuple[Any, int]], ordered: list[str], source_stream: Any,
                    open_file: Callable[[str], BinaryIO], payload_digests: PayloadDigests | None,
                    in_flight: int) -> int:
    """3. Each new file holds its inline payload byte for byte (streamed, never whole). The bytes read."""
    digests = payload_digests if payload_digests is not None else PayloadDigests(())

    def wanted(old: ByteStreamHandle) -> bytes:
        want = digests.get(old.payload.offset)
        if want is None:
            h = hashlib.sha256()
            for chunk in old.payload.iter_chunks(source_stream, _CHUNK):
                h.update(chunk)
            want = h.digest()
        return want

    def read_back(uri: str) -> tuple[int, bytes]:
        got, n = hashlib.sha256(), 0
        with open_file(uri) as stream:
            while chunk := stream.read(_CHUNK):
                got.update(chunk)
                n += len(chunk)
        return n, got.digest()

    total = 0
    found = bounded_map(read_back, (ordered[i] for _, i in moved), in_flight)
    for (old, i), (n, got) in zip(moved, found):
        uri = ordered[i]
        if n != old.payload.length or got != wanted(old):
            raise CompactionVerifyError(f"{uri} does not hold its inline payload ({n} bytes read, "
                                        f"{old.payload.length} expected, or the bytes differ)")
        total += n
    return total


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

