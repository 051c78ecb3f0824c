"""Where Statekeeper's Delta tables live: a local directory (default) or an s3:// prefix."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO, StorageConfig, local_path
from statekeeper.tables.errors import TableError, WarehouseNotWritableError
from statekeeper.uri import join_uri, normalize_uri

# What the write check writes (and removes): one page, the least a file system allocates for data.
_CHECK_BYTES = 4096


@dataclass(frozen=True)
class Warehouse:
    uri: str
    storage: StorageConfig = field(default_factory=StorageConfig)

    def __post_init__(self) -> None:
        try:
            norm = normalize_uri(self.uri)
        except ValueError as exc:
            raise TableError(f"invalid warehouse location {self.uri!r}: {exc}") from exc
        if not norm.startswith(("file://", "s3://")):
            raise TableError(f"warehouse must be a local path or an s3:// prefix, got {self.uri!r}")
        object.__setattr__(self, "uri", norm)

    @property
    def is_local(self) -> bool:
        return self.uri.startswith("file://")

    def table_uri(self, name: str) -> str:
        return join_uri(self.uri, name)

    def delta_location(self, name: str) -> str:
        """The location string deltalake expects (plain path for local tables)."""
        uri = self.table_uri(name)
        return local_path(uri) if self.is_local else uri

    def check_writable(self) -> None:
        """Refuse a local warehouse this process cannot write before a job does any work
        (WarehouseNotWritableError: one line naming the directory and what to do), rather than a
        traceback from the first table it writes, after the work, and a retry that cannot help. Writes one
        page to a private file in the warehouse, or in the nearest directory above it that exists (a job
        creates the rest), syncs it and removes it: nothing stays. An object-store warehouse answers its first
        write instead (its permissions are not a property of a directory)."""
        if not self.is_local:
            return
        wanted = Path(local_path(self.uri))
        existing = wanted
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise WarehouseNotWritableError(
                f"warehouse {wanted} cannot be created: {existing} is a file, not a directory; give --warehouse a "
                "path below a directory")
        where = existing if existing == wanted else f"{existing} (where {wanted} would be created)"
        probe = existing / f".statekeeper-write-check-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"\0" * _CHECK_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise WarehouseNotWritableError(_not_writable(where, exc)) from None
        finally:
            try:
                probe.unlink()
            except OSError:
                pass

    def storage_options(self) -> dict[str, str] | None:
        return None if self.is_local else self.storage.deltalake_storage_options()

    def file_io(self) -> GuardedFileIO:
        """FileIO confined to the warehouse: table writers can never touch checkpoint data."""
        return GuardedFileIO(RoutingFileIO(self.storage), Roots([self.uri]))

    def to_mapping(self) -> dict[str, Any]:
        return {"uri": self.uri, "storage": self.storage.to_mapping()}

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any]) -> Warehouse:
        return cls(mapping["uri"], StorageConfig.from_mapping(mapping.get("storage", {})))

    def __repr__(self) -> str:
        return f"Warehouse({self.uri!r}, {self.storage!r})"


def _not_writable(where: object, exc: OSError) -> str:
    """What failed writing the warehouse `where`, and what to do, in one line."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"warehouse {where} cannot be written: its disk is full ({exc.strerror}); free space on that file "
                "system (or raise the quota) and run again")
    if exc.errno == errno.EROFS:
        return (f"warehouse {where} cannot be written: it is on a read-only file system; give --warehouse a writable "
                "directory, or mount this one read-write")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"warehouse {where} cannot be written: permission denied for user id {os.geteuid()}; give this user "
                "write access to it, or give --warehouse a directory it may write")
    return (f"warehouse {where} cannot be written: {exc.strerror or exc}; give --warehouse a writable directory")
