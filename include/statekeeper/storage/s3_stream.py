"""Seekable read stream over an S3 object using ranged GETs and a read-ahead buffer.

The codec reads `_metadata` as many small reads with occasional seeks; one GET per small read would
be ruinous, one GET for a multi-GB `_metadata` would hold it all in memory. A single read-ahead
window (default 4 MiB) gives sequential reads one request per window and bounded memory.
Every GET carries If-Match with the ETag seen at open, so a concurrent overwrite fails the read
instead of silently splicing two versions.
"""
from __future__ import annotations

import io
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from statekeeper.storage.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageError,
    UnreadableObjectError,
)


class S3RangedInput(io.RawIOBase):
    def __init__(self, client: Any, bucket: str, key: str, *, uri: str, size: int, etag: str | None,
                 read_ahead: int) -> None:
        super().__init__()
        self._client = client
        self._bucket = bucket
        self._key = key
        self._uri = uri
        self._size = size
        self._etag = etag
        self._read_ahead = read_ahead
        self._pos = 0
        self._buf = b""
        self._buf_start = 0
        self.requests = 0  # ranged GETs issued (for tests and progress counters)

    @property
    def size(self) -> int:
        """Object size (the codec reads it instead of seeking to the end)."""
        return self._size

    # -- io.RawIOBase -------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if target < 0:
            raise ValueError(f"negative seek position {target} in {self._uri}")
        self._pos = target
        return target

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed stream")
        if size is None or size < 0:
            size = max(0, self._size - self._pos)
        end = min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        parts: list[bytes] = []
        while self._pos < end:
            buf_end = self._buf_start + len(self._buf)
            if self._buf_start <= self._pos < buf_end:
                take = min(end, buf_end) - self._pos
                offset = self._pos - self._buf_start
                parts.append(self._buf[offset: offset + take])
                self._pos += take
                continue
            # Miss: fetch the whole remaining request in one GET when it is larger than the window,
            # so a big read is one request and does not churn the buffer.
            want = max(end - self._pos, self._read_ahead)
            fetch_end = min(self._size, self._pos + want)
            self._buf = self._fetch(self._pos, fetch_end)
            self._buf_start = self._pos
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        return self.read(-1)

    def close(self) -> None:
        self._buf = b""
        super().close()

    # -- fetching -------------------------------------------------------------------------------

    def _fetch(self, start: int, end: int) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._key, "Range": f"bytes={start}-{end - 1}"}
        if self._etag:
            kwargs["IfMatch"] = f'"{self._etag}"'
        self.requests += 1
        try:
            response = self._client.get_object(**kwargs)
            data = response["Body"].read()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed",) or status == 412:
                raise ObjectChangedError(
                    f"{self._uri} changed while being read (ETag {self._etag} no longer current); re-list and retry"
                ) from exc
            if code in ("NoSuchKey", "404") or status == 404:
                raise ObjectNotFoundError(f"{self._uri} vanished while being read") from exc
            if code in ("AccessDenied", "403") or status == 403:
                raise UnreadableObjectError(f"access denied reading {self._uri}") from exc
            raise UnreadableObjectError(f"cannot read {self._uri} bytes {start}-{end - 1}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot read {self._uri}: {exc}") from exc
        if len(data) != end - start:
            raise UnreadableObjectError(
                f"short read from {self._uri}: asked bytes {start}-{end - 1}, got {len(data)} bytes"
            )
        return data
