"""Storage-layer errors. Each names the object (URI) at fault and what the caller can do."""
from __future__ import annotations

from statekeeper.errors import ConfigurationError, StatekeeperError


class StorageError(StatekeeperError):
    """Any failure talking to a file system or object store."""


class StorageConfigError(StorageError, ConfigurationError):
    """The storage configuration is incomplete or contradictory."""


class UnsupportedSchemeError(StorageError, ConfigurationError):
    """No FileIO handles this URI scheme."""


class ObjectNotFoundError(StorageError):
    """The object does not exist (or vanished while we looked at it)."""


class NotRegularFileError(ObjectNotFoundError):
    """The path names a symlink, FIFO, directory or other non-regular object: not a file Statekeeper
    will open, but something is there (a subclass so that callers asking "is the file there?" keep
    their answer, while callers that must not mistake it for absence can tell)."""


class UnreadableObjectError(StorageError):
    """The object exists but cannot be read (permissions, I/O error, throttling that outlived retries)."""


class ObjectChangedError(UnreadableObjectError):
    """The object was replaced while it was being read, so the bytes read are not one version of it."""


class ObjectExistsError(StorageError):
    """A create-only write found an object already there."""


class OutsideRootError(StorageError):
    """A URI lies outside every configured root; Statekeeper never touches such objects."""


class SymlinkRefusedError(OutsideRootError):
    """A path below a root passes through a symlink. Statekeeper never writes, deletes, copies or
    reads through one: it may lead outside the root, so the lexical root check would not hold."""


class RootConfigError(StorageConfigError):
    """Configured roots are invalid (overlapping, relative, unsupported scheme)."""


class UnsupportedRootSchemeError(RootConfigError, UnsupportedSchemeError):
    """A root on a scheme Statekeeper can spell but not list (hdfs://)."""


class RootNotFoundError(StorageError, ConfigurationError):
    """A configured root is missing (unmounted volume, missing bucket): indexing it as empty would lie."""


class EmptyRootError(RootNotFoundError):
    """An object-store root has no object under it: a mistyped prefix looks exactly like this."""
