"""Where Statekeeper's Delta tables live: a local directory (default) or an s3:// prefix."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statekeeper.storage import GuardedFileIO, Roots, RoutingFileIO, StorageConfig, local_path
from statekeeper.tables.errors import TableError
from statekeeper.uri import join_uri, normalize_uri


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
