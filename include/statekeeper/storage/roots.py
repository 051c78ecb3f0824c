"""Configured roots and the guard that keeps every storage operation inside them.

A root is a checkpoint base directory (`<root>/<job-id>/{chk-N,shared,taskowned}`) or a savepoint
base directory (`<root>/savepoint-<job6>-<hex12>/`). Statekeeper never lists, reads, writes or
deletes outside the roots it was given: a mistyped reference or relocation target must fail, not
touch someone else's data.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.errors import OutsideRootError, RootConfigError
from statekeeper.storage.model import DeleteFailure, DeleteReport, FileInfo
from statekeeper.uri import flink_path_uri, is_under, normalize_uri

_SUPPORTED = ("file://", "s3://")


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


class Roots:
    """An ordered, validated set of non-overlapping roots."""

    def __init__(self, uris: Iterable[str]) -> None:
        roots: list[Root] = []
        for raw in uris:
            try:
                # A root is a directory configured the way Flink's is (state.checkpoints.dir), so
                # it is spelled as Flink's Path spells it: `s3://b/cp//` is where Flink writes `cp/`.
                norm = flink_path_uri(raw)
            except ValueError as exc:
                raise RootConfigError(f"invalid root {raw!r}: {exc}") from exc
            if not norm.startswith(_SUPPORTED):
                raise RootConfigError(f"root {raw!r}: only file:// and s3:// roots are supported")
            if norm in ("file:///",) or norm.count("/") < 3:
                raise RootConfigError(f"root {raw!r} is a file system or bucket top level; name a directory")
            for other in roots:
                if norm == other.uri:
                    raise RootConfigError(f"root {raw!r} is configured twice")
                if is_under(norm, other.uri) or is_under(other.uri, norm):
                    raise RootConfigError(
                        f"roots {other.uri} and {norm} overlap; every object must belong to exactly one root"
                    )
            roots.append(Root(norm))
        if not roots:
            raise RootConfigError("at least one root is required")
        self._roots = tuple(roots)

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
    """Wraps a FileIO and rejects any URI outside `roots` with OutsideRootError."""

    def __init__(self, inner: FileIO, roots: Roots) -> None:
        self.inner = inner
        self.roots = roots
        self.scheme = inner.scheme

    def __repr__(self) -> str:
        return f"GuardedFileIO({self.inner!r}, {self.roots!r})"

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        self.roots.require(directory)
        return self.inner.list(directory, recursive=recursive)

    def list_dirs(self, directory: str) -> Iterator[str]:
        self.roots.require(directory)
        return self.inner.list_dirs(directory)

    def stat(self, uri: str) -> FileInfo:
        self.roots.require(uri)
        return self.inner.stat(uri)

    def check_directory(self, directory: str) -> None:
        self.roots.require(directory)
        self.inner.check_directory(directory)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        self.roots.require(uri)
        return self.inner.open_input(uri, info=info)

    def read_bytes(self, uri: str, *, info: FileInfo | None = None) -> bytes:
        self.roots.require(uri)
        return self.inner.read_bytes(uri, info=info)

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        self.roots.require(uri)
        return self.inner.write(uri, data, if_absent=if_absent, durable=durable)

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        # Outside URIs are reported as failures (never attempted) so one bad entry cannot abort
        # a batch half-way, and nothing outside is ever sent to the backend.
        outside: list[DeleteFailure] = []

        def inside() -> Iterator[str]:
            for uri in uris:
                if self.roots.root_of(uri) is None:
                    outside.append(DeleteFailure(normalize_uri(uri), "OutsideRoot",
                                                 "outside the configured roots; not deleted"))
                else:
                    yield uri

        report = self.inner.delete_many(inside())
        report.failed.extend(outside)
        return report

    def copy(self, source: str, target: str) -> FileInfo:
        self.roots.require(source)
        self.roots.require(target)
        return self.inner.copy(source, target)
