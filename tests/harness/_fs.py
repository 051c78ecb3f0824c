"""Filesystem primitives for the shared cache: an inter-process lock and atomic publication.

Several pytest sessions (other helpers, xdist workers, CI retries) share one cache directory, so
every expensive artifact is built under a lock and published by a single rename, or, when its
final location is baked into its content (Flink fixtures store absolute paths), generated in place
and marked complete with a marker file written last.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Iterator

COMPLETE_MARKER = "COMPLETE"


def cache_root() -> Path:
    """`$STATEKEEPER_CACHE`, default `~/.cache/statekeeper` (never inside the repository)."""
    return Path(os.environ.get("STATEKEEPER_CACHE") or Path.home() / ".cache" / "statekeeper").expanduser()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock held for the duration of the block (blocks until available)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def publish_dir(tmp: Path, final: Path) -> None:
    """Atomically move a fully built directory into place (same filesystem)."""
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return
    os.replace(tmp, final)


def is_complete(directory: Path) -> bool:
    return (directory / COMPLETE_MARKER).is_file()


def mark_complete(directory: Path) -> None:
    marker = directory / COMPLETE_MARKER
    tmp = directory / (COMPLETE_MARKER + ".tmp")
    tmp.write_text("ok\n")
    os.replace(tmp, marker)


def wipe(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
