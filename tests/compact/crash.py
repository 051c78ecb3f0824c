"""Run one compaction and SIGKILL this process right after its K-th write to storage (test helper).

    python -m tests.compact.crash <metadata uri> <size> <etag> <placement> <K>

The storage is the real local FileIO; the wrapper only counts the calls that change storage (write,
copy, delete_many) and kills the process, as a crash would, once the K-th has returned. Exit 0 means
the compaction finished before the K-th call (K larger than its number of writes).
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Any

from statekeeper.compact.apply import SnapshotRequest, compact_snapshot
from statekeeper.compact.plan import Placement
from statekeeper.storage import file_io


class KillAfter:
    """The real FileIO, killed after its K-th mutating call."""

    def __init__(self, inner: Any, k: int):
        self._inner, self._k, self.calls = inner, k, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _count(self) -> None:
        self.calls += 1
        if self.calls == self._k:
            os.kill(os.getpid(), signal.SIGKILL)

    def write(self, *args: Any, **kwargs: Any) -> Any:
        out = self._inner.write(*args, **kwargs)
        self._count()
        return out

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        out = self._inner.copy(*args, **kwargs)
        self._count()
        return out

    def delete_many(self, *args: Any, **kwargs: Any) -> Any:
        out = self._inner.delete_many(*args, **kwargs)
        self._count()
        return out


def main(argv: list[str]) -> int:
    uri, size, etag, placement, k = argv
    io = KillAfter(file_io(), int(k))
    out = compact_snapshot(io, SnapshotRequest(uri, int(size), etag or None, Placement(placement), 1024))
    print(out.outcome.value, io.calls, out.problem or "")
    return 0 if out.problem is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
