"""The byte-moving steps of one DR copy (statekeeper.storage.transfer drives them): reading a source exactly once
and exactly its size, writing a local target (atomically, or create-only in place), streaming into S3.

Outcomes of one attempt are exceptions the mover turns into results: the source vanished (`SourceGone`), it is
no longer the version pinned (`SourceChanged`), or the bytes moved are not the pinned size (`SizeMismatch`).
"""
from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable
from typing import Any, BinaryIO

from statekeeper.storage.errors import NotRegularFileError, ObjectChangedError, ObjectNotFoundError
from statekeeper.storage.local import file_uri

CHUNK = 4 * 1024 * 1024              # read size when streaming and hashing (= StorageConfig's read-ahead)
MAX_PART = 5 * 1024 ** 3             # S3's maximum part size (UploadPart and UploadPartCopy)
_KERNEL_CHUNK = 256 * 1024 * 1024    # bytes per copy_file_range/sendfile call
# copy_file_range cannot serve this pair of files (old kernel, cross-device, file system without it).
_NO_KERNEL_COPY = frozenset({errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM})


class SourceGone(Exception):
    """The source vanished (stat, read or server-side copy): SOURCE_MISSING."""


class SourceChanged(Exception):
    """The source is no longer the pinned version: SOURCE_CHANGED."""


class SizeMismatch(Exception):
    """Bytes written differ from the pinned source size."""


class SourceReader:
    """The source stream, read once: bytes are counted and hashed on the way, reading past or stopping short of the
    pinned size raises SizeMismatch, and the source's own trouble (gone, rewritten) becomes the item's outcome
    instead of a failure of the copy."""

    def __init__(self, stream: BinaryIO, uri: str, size: int, hasher: Any | None) -> None:
        self._stream = stream
        self._uri = uri
        self._size = size
        self._hasher = hasher
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._stream.read(size)
        except ObjectChangedError as exc:
            raise SourceChanged(f"{self._uri} changed while being copied: {exc}") from exc
        except NotRegularFileError:
            raise
        except ObjectNotFoundError as exc:
            raise SourceGone(f"{self._uri} vanished while being copied: {exc}") from exc
        self.count += len(data)
        if self.count > self._size or (not data and size != 0 and self.count != self._size):
            raise SizeMismatch(
                f"read {'more than ' if self.count > self._size else ''}{self.count} bytes from {self._uri}, "
                f"which was {self._size} bytes when stat'ed: it changed while being copied; nothing was made "
                "visible at the target; re-run the copy")
        if self._hasher is not None and data:
            self._hasher.update(data)
        return data

    def read_exact(self, size: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < size:
            data = self.read(min(size - got, MAX_PART))
            parts.append(data)
            got += len(data)   # a short read raised SizeMismatch at EOF already
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def finish(self) -> None:
        """Confirm the end of the source (one more byte would be a mismatch)."""
        self.read(1)

    @property
    def checksum(self) -> str | None:
        return self._hasher.hexdigest() if self._hasher is not None else None


class ExactStream:
    """What a FileIO's `write` reads when streaming a source to GCS or Azure: exactly the pinned size, and the last
    bytes only after the end of the source was confirmed, so an upload of a source that grew or shrank fails before
    it is committed (the stores make an object visible when its upload completes)."""

    def __init__(self, reader: SourceReader, size: int) -> None:
        self._reader = reader
        self._size = size
        self._done = 0
        self._finished = False

    def read(self, size: int = -1) -> bytes:
        remaining = self._size - self._done
        if remaining <= 0:
            if not self._finished:      # an empty source: nothing was handed over yet
                self._reader.finish()
                self._finished = True
            return b""
        want = remaining if size is None or size < 0 else min(size, remaining)
        if want == 0:
            return b""
        data = self._reader.read_exact(want)
        self._done += len(data)
        if self._done == self._size:
            self._reader.finish()       # one more byte would be a mismatch: raised before the last bytes go
            self._finished = True
        return data

    def readable(self) -> bool:
        return True


# -- local targets --------------------------------------------------------------------------------------------


def write_local_atomic(path: str, size: int, fill: Callable[[int], None], *, durable: bool) -> None:
    """Create or replace `path` atomically: `fill(fd)` writes a temp file beside it, which is checked for the
    expected size, fsynced (`durable`), and renamed over the target; on any failure it is removed, so a reader sees
    the old file or the whole new one, never a partial or wrong-sized one."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    try:
        try:
            fill(fd)
            _check_size(fd, size, path)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def create_local(path: str, size: int, fill: Callable[[int], None]) -> None:
    """Create `path`, which must not exist (O_EXCL: FileExistsError otherwise), by writing it in place; a failure
    removes it again. Not atomic for readers: only for targets nothing trusts before they are verified (DR copies:
    a `_metadata` naming them is written only after every object verified, and an object at the target is skipped
    only on proof of identity, never for being there). Durability comes from the caller's barrier."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    try:
        try:
            fill(fd)
            _check_size(fd, size, path)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise


def _check_size(fd: int, size: int, path: str) -> None:
    written = os.fstat(fd).st_size
    if written != size:
        raise SizeMismatch(f"wrote {written} bytes for {file_uri(path)}, but the source was {size} bytes when "
                           "pinned: it changed while being copied; the target was not replaced; re-run the copy")


class _NoKernelCopy(Exception):
    """This kernel copy cannot serve this pair of files; nothing was copied."""


def kernel_copy(src_fd: int, dst_fd: int, size: int) -> None:
    """Copy from the source's position to its end inside the kernel: copy_file_range (server-side on NFS 4.2,
    reflinks where the file system has them), else sendfile, else a read/write loop."""
    for copier in (os.copy_file_range, _sendfile):
        try:
            _kernel_loop(copier, src_fd, dst_fd, size)
            return
        except _NoKernelCopy:
            continue
    while data := os.read(src_fd, CHUNK):
        write_all(dst_fd, data)


def _sendfile(src_fd: int, dst_fd: int, count: int) -> int:
    return os.sendfile(dst_fd, src_fd, None, count)


def _kernel_loop(copier: Callable[[int, int, int], int], src_fd: int, dst_fd: int, size: int) -> None:
    copied = 0
    try:
        while n := copier(src_fd, dst_fd, _KERNEL_CHUNK):
            copied += n
    except OSError as exc:
        if copied or exc.errno not in _NO_KERNEL_COPY:
            raise
        raise _NoKernelCopy() from exc
    if copied == 0 and size > 0:
        # Some file systems (procfs-like, some FUSE) report 0 copied for files that have bytes.
        raise _NoKernelCopy()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# -- S3 targets -----------------------------------------------------------------------------------------------


def upload_to_s3(client: Any, bucket: str, key: str, reader: SourceReader, size: int, part: int, *,
                 create_only: bool) -> str | None:
    """Stream `size` bytes from `reader` into s3://bucket/key: one PUT up to `part`, else a multipart upload of
    `part`-sized parts (aborted on any failure). Create-only (If-None-Match: *) when `create_only`: another writer's
    object is never replaced blindly (412 -> the caller's retry decides). Returns the new ETag."""
    from statekeeper.storage.s3 import abort_upload

    create = {"IfNoneMatch": "*"} if create_only else {}
    if size <= part:
        body = reader.read_exact(size)
        reader.finish()   # before the PUT: a grown source must not be written at all
        return client.put_object(Bucket=bucket, Key=key, Body=body, **create).get("ETag")
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, size, part), start=1):
            body = reader.read_exact(min(part, size - start))
            etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                      Body=body)["ETag"]
            parts.append({"ETag": etag, "PartNumber": number})
        reader.finish()
        return client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                                MultipartUpload={"Parts": parts}, **create).get("ETag")
    except BaseException:
        abort_upload(client, bucket, key, upload_id)
        raise
