"""Configured roots and the guard that keeps every storage operation inside them.

A root is a checkpoint base directory (`<root>/<job-id>/{chk-N,shared,taskowned}`) or a savepoint
base directory (`<root>/savepoint-<job6>-<hex12>/`). Statekeeper never lists, reads, writes or
deletes outside the roots it was given: a mistyped reference or relocation target must fail, not
touch someone else's data.

Containment is physical, not only lexical: local roots are compared on their resolved paths (a
root symlinked into another root overlaps it), and `GuardedFileIO` refuses any local path whose
existing components below the root include a symlink (SymlinkRefusedError), for every operation:
`root/job/escape -> /elsewhere` must not let a write or delete land in /elsewhere. The listing
itself reports such symlinks as objects of their own (see storage.local).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.errors import (
    OutsideRootError,
    RootConfigError,
    StorageError,
    SymlinkRefusedError,
    UnsupportedRootSchemeError,
)
from statekeeper.storage.local import file_uri, local_path, symlink_below
from statekeeper.storage.model import DeleteFailure, DeleteReport, FileInfo
from statekeeper.uri import flink_path_uri, is_under, normalize_uri

# Canonical prefixes of the schemes a FileIO lists (normalize_uri maps s3a/s3n/s3p, abfs and wasb[s] onto these).
_SUPPORTED = ("file://", "s3://", "oss://", "gs://", "abfss://")


@dataclass(frozen=True, slots=True)
class Root:
    uri: str

    @property
    def root_id(self) -> str:
        """Stable short id of the root, used as a table partition value (URIs make poor paths)."""
        return root_id_of(self.uri)

    def relative(self, uri: str) -> str:
        """Path of `uri` below this root ("" for the root itself)."""
        norm = normalize_uri(uri)
        if norm == self.uri:
            return ""
        if not is_under(norm, self.uri):
            raise OutsideRootError(f"{uri} is not under root {self.uri}")
        return norm[len(self.uri.rstrip("/")) + 1:]


def root_id_of(uri: str) -> str:
    return hashlib.sha1(flink_path_uri(uri).encode("utf-8")).hexdigest()[:16]


def resolved_uri(uri: str) -> str:
    """`uri` with symlinks resolved for local locations (realpath, also of a not yet existing
    tail); object-store URIs have no links and stay as they are."""
    norm = normalize_uri(uri)
    if not norm.startswith("file://"):
        return norm
    return file_uri(os.path.realpath(local_path(norm)))


def _overlap(a: str, b: str) -> bool:
    return is_under(a, b) or is_under(b, a)


class Roots:
    """An ordered, validated set of non-overlapping roots."""

    def __init__(self, uris: Iterable[str]) -> None:
        roots: list[Root] = []
        resolved_roots: list[str] = []
        for raw in uris:
            try:
                # A root is a directory configured the way Flink's is (state.checkpoints.dir), so
                # it is spelled as Flink's Path spells it: `s3://b/cp//` is where Flink writes `cp/`.
                norm = flink_path_uri(raw)
            except ValueError as exc:
                raise RootConfigError(f"invalid root {raw!r}: {exc}") from exc
            if norm.startswith("hdfs://"):
                raise UnsupportedRootSchemeError(
                    f"root {raw!r} ({norm}): HDFS paths are understood, but listing an HDFS root needs an HDFS "
                    "client, which Statekeeper does not ship; supported roots are file://, s3:// (s3a/s3n/s3p), "
                    "oss://, gs:// and abfss:// (abfs/wasb/wasbs)"
                )
            if not norm.startswith(_SUPPORTED):
                raise RootConfigError(f"root {raw!r}: supported roots are file://, s3:// (s3a/s3n/s3p), oss://, gs:// "
                                      "and abfss:// (abfs/wasb/wasbs)")
            if norm in ("file:///",) or norm.count("/") < 3:
                raise RootConfigError(f"root {raw!r} is a file system or bucket top level; name a directory")
            resolved = resolved_uri(norm)
            for other, other_resolved in zip(roots, resolved_roots, strict=True):
                if norm == other.uri:
                    raise RootConfigError(f"root {raw!r} is configured twice")
                if _overlap(norm, other.uri) or _overlap(resolved, other_resolved):
                    via = "" if _overlap(norm, other.uri) else f" (resolved: {other_resolved} and {resolved})"
                    raise RootConfigError(
                        f"roots {other.uri} and {norm} overlap{via}; every object must belong to exactly one root"
                    )
            roots.append(Root(norm))
            resolved_roots.append(resolved)
        if not roots:
            raise RootConfigError("at least one root is required")
        self._roots = tuple(roots)

    def check_separate(self, location: str, what: str = "warehouse") -> None:
        """Raise RootConfigError when `location` (the warehouse) lies inside a root, contains one,
        or equals one, on resolved paths: the index would list its own tables as checkpoint files
        (`unknown` rows a cleaner would delete)."""
        loc = normalize_uri(location)
        loc_resolved = resolved_uri(loc)
        for root in self._roots:
            root_resolved = resolved_uri(root.uri)
            if _overlap(loc, root.uri) or _overlap(loc_resolved, root_resolved):
                raise RootConfigError(
                    f"{what} {loc} overlaps root {root.uri} (resolved: {loc_resolved} and {root_resolved}); "
                    f"put the {what} outside every root and no root inside the {what}"
                )

    def __iter__(self) -> Iterator[Root]:
        return iter(self._roots)

    def __len__(self) -> int:
        return len(self._roots)

    def __repr__(self) -> str:
        return f"Roots({[r.uri for r in self._roots]!r})"

    @property
    def uris(self) -> list[str]:
        return [r.uri for r in self._roots]

    def root_of(self, uri: str) -> Root | None:
        norm = normalize_uri(uri)
        for root in self._roots:
            if is_under(norm, root.uri):
                return root
        return None

    def require(self, uri: str) -> Root:
        root = self.root_of(uri)
        if root is None:
            raise OutsideRootError(
                f"{uri} lies outside the configured roots ({', '.join(self.uris)}); refusing to touch it"
            )
        return root


class GuardedFileIO(FileIO):
    """Wraps a FileIO and rejects any URI outside `roots` with OutsideRootError, and any local
    path that passes through a symlink below its root with SymlinkRefusedError."""

    def __init__(self, inner: FileIO, roots: Roots) -> None:
        self.inner = inner
        self.roots = roots
        self.scheme = inner.scheme

    def __repr__(self) -> str:
        return f"GuardedFileIO({self.inner!r}, {self.roots!r})"

    def _require(self, uri: str) -> Root:
        root = self.roots.require(uri)
        if root.uri.startswith("file://"):
            # A check before the operation leaves a window in which a directory could be swapped
            # for a link; closing it needs dir-fd operations throughout. The check still stops
            # every link that exists when the operation starts.
            link = symlink_below(local_path(root.uri), local_path(uri))
            if link is not None:
                raise SymlinkRefusedError(
                    f"{uri}: {file_uri(link)} is a symlink inside root {root.uri}; Statekeeper never reads, writes "
                    "or deletes through symlinks (it could lead outside the root): replace the link with the "
                    "real directory or file, or remove it"
                )
        return root

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        self._require(directory)
        return self.inner.list(directory, recursive=recursive)

    def list_dirs(self, directory: str) -> Iterator[str]:
        self._require(directory)
        return self.inner.list_dirs(directory)

    def stat(self, uri: str) -> FileInfo:
        self._require(uri)
        return self.inner.stat(uri)

    def check_directory(self, directory: str) -> None:
        self._require(directory)
        self.inner.check_directory(directory)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        self._require(uri)
        return self.inner.open_input(uri, info=info)

    def read_bytes(self, uri: str, *, info: FileInfo | None = None) -> bytes:
        self._require(uri)
        return self.inner.read_bytes(uri, info=info)

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        self._require(uri)
        return self.inner.write(uri, data, if_absent=if_absent, durable=durable)

    def make_durable(self, uris: list[str]) -> None:
        for uri in uris:
            self._require(uri)
        self.inner.make_durable(uris)

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        # Refused URIs are reported as failures (never attempted) so one bad entry cannot abort
        # a batch half-way, and nothing outside is ever sent to the backend.
        refused: list[DeleteFailure] = []

        def inside() -> Iterator[str]:
            for uri in uris:
                try:
                    self._require(uri)
                except SymlinkRefusedError as exc:
                    refused.append(DeleteFailure(normalize_uri(uri), "Symlink", f"{exc}; not deleted"))
                except OutsideRootError:
                    refused.append(DeleteFailure(normalize_uri(uri), "OutsideRoot",
                                                 "outside the configured roots; not deleted"))
                except StorageError as exc:
                    refused.append(DeleteFailure(normalize_uri(uri), type(exc).__name__, f"{exc}; not deleted"))
                else:
                    yield uri

        report = self.inner.delete_many(inside())
        report.failed.extend(refused)
        return report

    def copy(self, source: str, target: str) -> FileInfo:
        self._require(source)
        self._require(target)
        return self.inner.copy(source, target)
