"""Storage-layer errors. Each names the object (URI) at fault and what the caller can do."""
from __future__ import annotations

from statekeeper.errors import ConfigurationError, StatekeeperError
from statekeeper.storage.model import RETRIABLE_HTTP_STATUS


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


# Exceptions of google-cloud-storage's and azure-storage-blob's transports that mean "no answer came".
_NO_ANSWER = frozenset({
    "ConnectionError", "Timeout", "ConnectTimeout", "ReadTimeout", "ChunkedEncodingError",  # requests (GCS)
    "TransportError", "ProtocolError", "RetryError",                                          # google-auth, urllib3
    "ServiceRequestError", "ServiceResponseError", "ServiceRequestTimeoutError",              # azure-core
    "ServiceResponseTimeoutError", "IncompleteReadError",
})
_VENDORS = ("google", "azure", "requests", "urllib3")


def vendor_status(exc: BaseException) -> int | None:
    """The HTTP status of an error raised by google-cloud-storage (`code`) or azure-storage-blob
    (`status_code`), None for anything else."""
    module = type(exc).__module__
    if module.startswith("azure."):
        status = getattr(exc, "status_code", None)
    elif module.startswith("google."):
        status = getattr(exc, "code", None)
    else:
        return None
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def vendor_transient(exc: BaseException) -> bool | None:
    """Whether an error of the GCS or Azure client (or their HTTP transports) is worth retrying: throttling,
    a 5xx or 408, or no answer at all. None when `exc` is not one of theirs (boto3's are judged elsewhere)."""
    status = vendor_status(exc)
    if status is not None:
        return status in RETRIABLE_HTTP_STATUS
    if type(exc).__module__.split(".")[0] in _VENDORS:
        return type(exc).__name__ in _NO_ANSWER or None
    return None


def is_vendor_error(exc: BaseException) -> bool:
    """An exception raised by the GCS or Azure client libraries or their transports (a storage problem to
    report, not a programming error)."""
    return type(exc).__module__.split(".")[0] in _VENDORS
