"""Streaming behaviour: the reader works on a minimal ByteSource, skips inline payloads it was
not asked to load (seeks over them, never reads them), and keeps memory independent of their
size; payloads stream back out of the source on demand (reads, copies, rewrites)."""
from __future__ import annotations

import hashlib
import io
import tracemalloc
from dataclasses import replace

import pytest

from statekeeper.format import (
    ByteStreamHandle,
    InlineBytes,
    MetadataFormatError,
    OperatorState,
    OperatorStreamHandle,
    SubtaskState,
    TruncatedMetadataError,
    open_metadata,
    read_metadata,
    to_bytes,
    write_metadata,
)
from tests.format.support.samples import sample_model


class MinimalSource:
    """Only what the protocol requires: read(n), seek(pos), tell(), plus `size`. Counts reads."""

    def __init__(self, data: bytes):
        self._data = data
        self._pos = 0
        self.size = len(data)
        self.bytes_read = 0
        self.seeks = 0

    def read(self, n: int) -> bytes:
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        self.bytes_read += len(chunk)
        return chunk

    def seek(self, pos: int) -> int:
        self.seeks += 1
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos


class HashingSink:
    """A write-only output that keeps nothing (so memory measurements see only the writer)."""

    def __init__(self):
        self.digest = hashlib.sha256()

    def write(self, b) -> int:
        self.digest.update(b)
        return len(b)


def big_inline_model(n_handles: int, payload: int):
    blob = InlineBytes.of(b"x" * payload)
    subtasks = tuple(
        SubtaskState(i, managed_operator=OperatorStreamHandle((), ByteStreamHandle(f"chk-1/h{i}", blob)))
        for i in range(n_handles)
    )
    base = sample_model(6)
    return replace(base, master_states=(), operators=(OperatorState("ab" * 16, n_handles, n_handles, subtasks),))


def test_payloads_are_seeked_over_not_read():
    data = to_bytes(big_inline_model(40, 1 << 20))  # 40 MiB of inline state
    src = MinimalSource(data)
    tracemalloc.start()
    model = read_metadata(src, "mem://big/chk-1/_metadata")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # one 64 KiB read-ahead chunk per skipped 1 MiB payload at most
    assert src.bytes_read <= 40 * (64 << 10) + (64 << 10), f"read {src.bytes_read} of {len(data)} bytes"
    assert peak < 4 << 20, peak
    handles = [s.managed_operator.delegate for s in model.operators[0].subtasks]
    assert all(h.payload.data is None and h.payload.length == 1 << 20 for h in handles)
    # on demand: one payload, streamed in chunks from the same minimal source
    chunks = list(handles[7].payload.iter_chunks(src, chunk=1 << 16))
    assert len(chunks) == 16 and b"".join(chunks) == b"x" * (1 << 20)
    # writing streams every unloaded payload from the source: identical output, bounded memory
    out = HashingSink()
    tracemalloc.start()
    assert write_metadata(model, out, inline_source=src) == len(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert out.digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert peak < 4 << 20, peak


def test_load_inline_reads_everything():
    data = to_bytes(big_inline_model(3, 1000))
    src = MinimalSource(data)
    model = read_metadata(src, "mem://x", load_inline=True)
    assert src.bytes_read == len(data)
    assert all(s.managed_operator.delegate.payload.data == b"x" * 1000 for s in model.operators[0].subtasks)


def test_source_that_shrinks_under_the_reader():
    data = to_bytes(big_inline_model(3, 100_000))
    src = MinimalSource(data)
    src.size = len(data) + 10  # claims more than it has: a concurrent truncation / bad size
    with pytest.raises(TruncatedMetadataError, match="shorter than its stated size"):
        read_metadata(src, "mem://shrunk")


def test_plain_file_objects_paths_and_directories(tmp_path):
    data = to_bytes(sample_model(5))
    chk = tmp_path / "chk-3"
    chk.mkdir()
    (chk / "_metadata").write_bytes(data)
    by_dir = open_metadata(chk)
    by_path = open_metadata(chk / "_metadata")
    by_uri = open_metadata((chk / "_metadata").as_uri())
    with open(chk / "_metadata", "rb") as fh:
        fh.seek(17)  # the reader rewinds: a source is parsed from its start
        by_fileobj = read_metadata(fh, "x")
    assert by_dir == by_path == by_uri == by_fileobj
    assert by_dir.uri == str(chk / "_metadata")
    with pytest.raises(MetadataFormatError):
        read_metadata(io.BytesIO(b""), "empty")
