"""The FileIO interface: what every storage backend offers to the rest of Statekeeper.

URIs in and out are canonical (`statekeeper.uri.normalize_uri`). Listings are generators that page
through the store, so a caller never holds a whole listing unless it chooses to.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from statekeeper.storage.model import DeleteReport, FileInfo


class FileIO(ABC):
    """One storage backend (a URI scheme). Implementations must be picklable for Spark tasks."""

    scheme: str

    @abstractmethod
    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        """Objects below `directory` (treated as a directory, never as a key prefix: `a/b` does not
        list `a/bc`). Lazy and paginated. With recursive=False only objects directly inside it."""

    @abstractmethod
    def list_dirs(self, directory: str) -> Iterator[str]:
        """URIs of the child "directories" of `directory` (S3: common prefixes)."""

    @abstractmethod
    def stat(self, uri: str) -> FileInfo:
        """Raises ObjectNotFoundError when absent."""

    def exists(self, uri: str) -> bool:
        from statekeeper.storage.errors import ObjectNotFoundError

        try:
            self.stat(uri)
        except ObjectNotFoundError:
            return False
        return True

    @abstractmethod
    def check_directory(self, directory: str) -> None:
        """Raise RootNotFoundError when `directory` cannot possibly hold objects (missing local
        directory, missing bucket). An existing but empty location passes."""

    @abstractmethod
    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        """Seekable binary stream (read/seek/tell; read(n) returns n bytes unless at EOF).

        Passing the listed `info` saves a stat call and pins the version read: if the object
        changes under the reader, reads fail with ObjectChangedError instead of mixing versions.
        """

    def read_bytes(self, uri: str, *, info: FileInfo | None = None) -> bytes:
        with self.open_input(uri, info=info) as stream:
            return stream.read()

    def sha256(self, uri: str) -> str | None:
        """Hex SHA-256 of the object's bytes, streamed; None when it does not exist."""
        import hashlib

        from statekeeper.storage.errors import ObjectNotFoundError

        try:
            stream = self.open_input(uri)
        except ObjectNotFoundError:
            return None
        digest = hashlib.sha256()
        with stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    @abstractmethod
    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        """Create or replace an object atomically (readers see the old or the new bytes, never a
        mix). With if_absent=True, raise ObjectExistsError instead of replacing. durable=False
        skips the flush to stable storage on file systems (object stores are always durable)."""

    def make_durable(self, uris: list[str]) -> None:
        """Flush objects written with durable=False to stable storage (their data and directory
        entries). Object stores are durable once a write returns: nothing to do."""

    @abstractmethod
    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        """Delete objects in batches; per-object failures are reported, not raised."""

    @abstractmethod
    def copy(self, source: str, target: str) -> FileInfo:
        """Server-side copy within this backend."""
