"""Storage layer: one FileIO interface over local/NFS files, S3 (and OSS through its S3 API), Google Cloud
Storage and Azure Blob storage, plus root guarding.

No Spark or Airflow imports here: this layer runs in Spark tasks, Airflow workers and tests alike.
"""
from statekeeper.storage.base import FileIO
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import (
    EmptyRootError,
    NotRegularFileError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectNotFoundError,
    OutsideRootError,
    RootConfigError,
    RootNotFoundError,
    StorageConfigError,
    StorageError,
    SymlinkRefusedError,
    UnreadableObjectError,
    UnsupportedRootSchemeError,
    UnsupportedSchemeError,
)
from statekeeper.storage.local import LocalFileIO, local_path
from statekeeper.storage.model import DeleteFailure, DeleteReport, FileInfo, ObjectType
from statekeeper.storage.roots import GuardedFileIO, Root, Roots, root_id_of
from statekeeper.storage.router import RoutingFileIO, scheme_of


def file_io(config: StorageConfig | None = None) -> RoutingFileIO:
    """The FileIO for any supported URI, configured for the object stores by `config` (or the environment)."""
    return RoutingFileIO(config if config is not None else StorageConfig.from_env())


__all__ = [
    "DeleteFailure", "DeleteReport", "EmptyRootError", "FileIO", "FileInfo", "GuardedFileIO", "LocalFileIO",
    "NotRegularFileError",
    "ObjectChangedError", "ObjectExistsError", "ObjectNotFoundError", "ObjectType", "OutsideRootError", "Root",
    "RootConfigError", "RootNotFoundError", "Roots", "RoutingFileIO", "StorageConfig",
    "StorageConfigError", "StorageError", "SymlinkRefusedError", "UnreadableObjectError", "UnsupportedRootSchemeError",
    "UnsupportedSchemeError",
    "file_io", "local_path", "root_id_of", "scheme_of",
]
