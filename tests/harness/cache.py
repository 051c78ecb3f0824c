"""Housekeeping for the shared cache: drop fixtures and compiled classes of old source hashes.

Every change to the generator (or to a scenario) gives new fixture directories; old ones are
only garbage once no session can still be using them, so only entries untouched for a day go,
and never one whose generation lock is held.
"""
from __future__ import annotations

import fcntl
import re
import shutil
import time
from pathlib import Path

from tests.harness import scenarios
from tests.harness._fs import COMPLETE_MARKER, cache_root
from tests.harness.flink import java_sources_hash
from tests.harness.store import fixture_dir

_FIXTURE = re.compile(r"^(?P<scenario>[a-z_]+)-(?P<hash>[0-9a-f]{12})$")


def prune_stale(max_age_s: float = 86_400) -> list[Path]:
    """Remove cache entries of other source hashes that were not touched for `max_age_s`."""
    root = cache_root()
    cutoff = time.time() - max_age_s
    removed: list[Path] = []
    for version_dir in sorted((root / "fixtures").glob("*")):
        version = version_dir.name
        for entry in sorted(version_dir.iterdir()):
            m = _FIXTURE.match(entry.name)
            if not m or not entry.is_dir():
                continue
            current = (m["scenario"] in scenarios.PLANS and m["scenario"] in scenarios.scenarios_for(version)
                       and fixture_dir(version, m["scenario"]) == entry)
            marker = entry / COMPLETE_MARKER
            touched = (marker if marker.exists() else entry).stat().st_mtime
            if not current and touched < cutoff and _remove_unlocked(entry, version_dir / f"{entry.name}.lock"):
                removed.append(entry)
    current_classes = java_sources_hash()
    for classes in sorted((root / "harness").glob("*/*")):
        if classes.name != current_classes and classes.stat().st_mtime < cutoff:
            if _remove_unlocked(classes, classes / "compile.lock"):
                removed.append(classes)
    for tmp in sorted([*(root / "tmp").glob("verify-*"), *(root / "tmp").glob("run-*")]):
        if tmp.stat().st_mtime < cutoff:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def _remove_unlocked(directory: Path, lock: Path) -> bool:
    """Delete `directory` unless someone holds `lock` (generation or compilation in progress)."""
    if not lock.exists():
        shutil.rmtree(directory, ignore_errors=True)
        return True
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            shutil.rmtree(directory, ignore_errors=True)
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    # The (empty) lock file stays: unlinking it could split waiters across two inodes.
    return True
