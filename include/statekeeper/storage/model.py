"""Value objects returned by FileIO implementations."""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class ObjectType(StrEnum):
    """What a listed object is. Object stores only have FILE; a local file system also has the
    rest, which are listed as objects of their own (never followed, never opened) so that nothing
    below a root vanishes from the index silently."""

    FILE = "file"
    SYMLINK = "symlink"
    DIRECTORY = "directory"     # only directories where a file is expected (local `_metadata`)
    FIFO = "fifo"
    SOCKET = "socket"
    DEVICE = "device"
    OTHER = "other"

    @property
    def is_regular(self) -> bool:
        return self is ObjectType.FILE


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One object as listed or stat'ed.

    `etag` identifies the object's version: the S3 ETag, or for local files a fingerprint of
    inode, mtime (ns) and size, so an atomic replace with equal size and mtime still differs.
    `mtime` is timezone-aware UTC. `object_type` is FILE except for local non-regular objects
    (their size, mtime and etag are those of the object itself, e.g. a symlink's own lstat).
    `checksum` is a content checksum the store computed and verifies itself, as `<algorithm>:<value>`
    (GCS: `crc32c:<base64>`; Azure: `md5:<hex>` of a blob's Content-MD5), where the store has one that identifies the bytes wherever they are stored
    (an S3 ETag does not: it depends on the upload and on the encryption); None elsewhere. Objects with
    checksums of one algorithm have the same bytes exactly when the checksums are equal (to CRC32C's
    confidence: a corruption check, not a cryptographic one).
    """

    uri: str
    size: int
    mtime: datetime
    etag: str | None = None
    object_type: ObjectType = ObjectType.FILE
    checksum: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteFailure:
    uri: str
    code: str
    message: str


@dataclass(slots=True)
class DeleteReport:
    """Outcome of a batched delete: every requested URI appears in exactly one list.

    `missing` are URIs that were already gone (local file systems can tell; S3 reports those as
    deleted). Callers treat missing as success but may want to know.
    """

    deleted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[DeleteFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def extend(self, other: DeleteReport) -> None:
        self.deleted.extend(other.deleted)
        self.missing.extend(other.missing)
        self.failed.extend(other.failed)


class DeleteRefused(Exception):
    """An object `delete_in_batches` must not send (no key, an unparseable URI): reported as failed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def delete_in_batches(uris: Iterable[str], locate: Callable[[str], tuple[Hashable, Any, str]], limit: int,
                      send: Callable[[Any, list[str]], DeleteReport]) -> DeleteReport:
    """Group deletes into batch requests of at most `limit` objects per bucket/container, in order:
    `locate(uri)` gives (batch key, what `send` needs for that batch, the object's name in it), or raises
    DeleteRefused; `send(target, names)` deletes one batch and reports every name."""
    report = DeleteReport()
    pending: dict[Hashable, tuple[Any, list[str]]] = {}
    for uri in uris:
        try:
            key, target, name = locate(uri)
        except DeleteRefused as refused:
            report.failed.append(DeleteFailure(uri, refused.code, refused.message))
            continue
        _, names = pending.setdefault(key, (target, []))
        names.append(name)
        if len(names) >= limit:
            report.extend(send(target, names))
            pending[key] = (target, [])
    for target, names in pending.values():
        if names:
            report.extend(send(target, names))
    return report


class ConditionalOutcome(StrEnum):
    """What a delete pinned to one version (GCS `ifGenerationMatch`, Azure `If-Match`) did to one object."""

    DELETED = "deleted"      # the object was that version and is gone now
    MISSING = "missing"      # no live object with that name (404)
    CHANGED = "changed"      # another version is live: the store refused the delete (412), nothing was deleted
    FAILED = "failed"        # any other answer; `retriable` says whether trying again may help


# HTTP statuses of a request (or of one call in a batch) that mean "try again later". The one list every mover
# judges by (statekeeper.storage.retry): 408 and 429 included, 501 (not implemented) and 505 never.
RETRIABLE_HTTP_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class ConditionalDelete:
    """The answer to one version-pinned delete (`delete_if_unchanged`)."""

    uri: str
    outcome: ConditionalOutcome
    status: int | None = None    # HTTP status of the call (None: no answer, e.g. the connection broke)
    code: str = ""               # the store's error code, or the status as text
    message: str = ""
    retriable: bool = False      # FAILED only: throttling, a 5xx or a broken connection (trying again may help)
    current: FileInfo | None = None   # CHANGED: the object as the store showed it, where the answer carried it


class DeleteRecheck(StrEnum):
    """How a deleter makes sure an object is still the planned version when it deletes it.

    PRECONDITION: the delete itself is conditional on the planned version (S3 and OSS: the per-object ETag of
    DeleteObjects; GCS `ifGenerationMatch`; Azure `If-Match`); the store refuses a changed object. Used only where
    the store's self-test proved that it enforces the precondition (statekeeper.storage.enforcement).
    LISTING: list each directory again just before deleting and compare size, version and mtime; then delete
    (stores whose self-test found the precondition ignored or could not complete, and stores configured so; on
    GCS and Azure the delete stays conditional as well). Local files are always re-checked by lstat, whatever
    the setting."""

    PRECONDITION = "precondition"
    LISTING = "listing"


@dataclass(frozen=True, slots=True)
class ListPage:
    """One listing page of the direct children of a directory (`FileIO.list_page`).

    `objects` carry their versions (FileInfo.etag); non-regular entries (an Azure hierarchical-namespace
    directory) are listed with their ObjectType. `bound` is the greatest URI the page covers (its last object or
    sub-directory: a sub-directory `d/` stands for every key below it); `token` continues the listing (None: the
    page was the last). `scanned` counts every name on the page, sub-directories included."""

    objects: list[FileInfo]
    bound: str | None
    token: str | None
    scanned: int
