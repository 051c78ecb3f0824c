"""Where Spark's own parquet writer stages a write, and the stagings a killed write leaves behind.

`parquet_write` stages each write of a local table in `<table>/_statekeeper_staging/<commit id>/` and
removes that directory when the write ends, committed or not. A driver killed mid-write (SIGKILL, the
kernel's OOM killer, a lost node) cannot, and its staging keeps a copy of the rows it was writing. Delta
readers and vacuum skip `_` entries, so nothing else would ever remove it: warehouse maintenance does,
once nothing has been written below it for at least `MIN_AGE` (and the run's retention).

Standard library only: maintenance runs without Spark.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

STAGING_DIR = "_statekeeper_staging"
# A live write adds files below its staging until it ends; no write of a Statekeeper table runs for a day, so
# a staging untouched that long belongs to a driver that died. Maintenance with a shorter retention (tests,
# an impatient operator) still waits this long: removing a live write's staging would fail that write.
MIN_AGE = timedelta(days=1)


@dataclass(frozen=True)
class Staging:
    """One write's staging directory: what it holds and when anything in it last changed."""

    path: str
    files: int
    bytes: int
    newest: datetime


def _scan(path: str) -> Staging:
    files = size = 0
    newest = os.lstat(path).st_mtime
    for directory, dirs, names in os.walk(path):
        for name in dirs:
            newest = max(newest, os.lstat(os.path.join(directory, name)).st_mtime)
        for name in names:
            st = os.lstat(os.path.join(directory, name))
            newest = max(newest, st.st_mtime)
            files += 1
            size += st.st_size
    return Staging(path, files, size, datetime.fromtimestamp(newest, timezone.utc))


def stagings(table_root: str) -> list[Staging]:
    """Every staging directory of the local table at `table_root` (none when it has no staging area)."""
    base = os.path.join(table_root, STAGING_DIR)
    try:
        entries = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    return [_scan(os.path.join(base, e)) for e in entries if os.path.isdir(os.path.join(base, e))]


def abandoned(table_root: str, now: datetime, retention: timedelta) -> list[Staging]:
    """The stagings of `table_root` nothing has written to for max(`retention`, MIN_AGE) before `now`."""
    cutoff = now - max(retention, MIN_AGE)
    return [s for s in stagings(table_root) if s.newest < cutoff]


def remove(staging: Staging) -> bool:
    """Remove `staging` if nothing below it changed since it was found (a write that came back to life keeps
    it); True when removed."""
    try:
        if _scan(staging.path).newest != staging.newest:
            return False
    except FileNotFoundError:
        return False
    shutil.rmtree(staging.path)
    return True
