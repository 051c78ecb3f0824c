"""A seekable read stream over an object store's ranged GETs, with one read-ahead window.

The codec reads `_metadata` as many small reads with occasional seeks; one GET per small read would
be ruinous, one GET for a multi-GB `_metadata` would hold it all in memory. A single read-ahead
window (default 4 MiB) gives sequential reads one request per window and bounded memory.
Subclasses fetch one byte range, pinned to the version seen at open (S3/Azure `If-Match` on the
ETag, a GCS generation), so a concurrent overwrite fails the read instead of splicing two versions.
"""
from __future__ import annotations

import io
from typing import Any


class RangedInput(io.RawIOBase):
    """Buffering and seeking over `_fetch(start, end)`, which returns exactly bytes [start, end)."""

    def __init__(self, *, uri: str, size: int, read_ahead: int) -> None:
        super().__init__()
        self._uri = uri
        self._size = size
        self._read_ahead = read_ahead
        self._pos = 0
        self._buf = b""
        self._buf_start = 0
        self.requests = 0  # ranged GETs issued (for tests and progress counters)

    def _fetch(self, start: int, end: int) -> bytes:
        raise NotImplementedError

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
