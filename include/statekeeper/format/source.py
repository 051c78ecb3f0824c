"""The minimal byte-source seam the codec reads from.

The codec never opens anything but local files itself; the storage layer hands it objects (an S3
object wrapper, a local file) that implement this protocol. Only `read`, `seek` and `tell` are
required; `size` (attribute or zero-argument method) saves a seek to the end.
"""
from __future__ import annotations

import io
import os
from contextlib import contextmanager
from typing import Any, Iterator, Protocol, runtime_checkable

COPY_CHUNK = 1 << 20


@runtime_checkable
class ByteSource(Protocol):
    def read(self, n: int, /) -> bytes: ...

    def seek(self, pos: int, /) -> Any: ...

    def tell(self) -> int: ...


def source_size(src: Any) -> int:
    """Total length of a source: its `size`, else fstat, else seek to the end and back."""
    size = getattr(src, "size", None)
    if callable(size):
        size = size()
    if isinstance(size, int):
        return size
    fileno = getattr(src, "fileno", None)
    if fileno is not None:
        try:
            return os.fstat(fileno()).st_size
        except (OSError, io.UnsupportedOperation):
            pass
    here = src.tell()
    try:
        end = src.seek(0, io.SEEK_END)
    except TypeError as exc:
        raise TypeError("byte source has no size and cannot seek to its end") from exc
    if not isinstance(end, int):
        end = src.tell()
    src.seek(here)
    return end


@contextmanager
def opened(source: Any) -> Iterator[Any]:
    """Yield a binary source for a path-like (opened and closed here) or an existing source."""
    if isinstance(source, (str, os.PathLike)):
        with open(os.fspath(source), "rb", buffering=0) as fh:
            yield fh
    elif isinstance(source, (bytes, bytearray, memoryview)):
        yield io.BytesIO(bytes(source))
    else:
        yield source


def read_exact(src: Any, offset: int, length: int) -> bytes:
    """Read `length` bytes at `offset`; a short read means the source changed under us."""
    src.seek(offset)
    parts = []
    left = length
    while left > 0:
        chunk = src.read(min(left, COPY_CHUNK * 8))
        if not chunk:
            raise EOFError(f"source ended {left} bytes early reading {length} bytes at {offset}")
        parts.append(chunk)
        left -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def iter_range(src: Any, offset: int, length: int, chunk: int = COPY_CHUNK) -> Iterator[bytes]:
    """Stream `length` bytes starting at `offset` in bounded chunks."""
    src.seek(offset)
    left = length
    while left > 0:
        data = src.read(min(left, chunk))
        if not data:
            raise EOFError(f"source ended {left} bytes early streaming {length} bytes at {offset}")
        left -= len(data)
        yield data
