"""Cache housekeeping of the harness (no JVM needed)."""
import fcntl
import os
import time

import pytest

from tests.harness.cache import prune_stale
from tests.harness.store import fixture_dir


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STATEKEEPER_CACHE", str(tmp_path))
    return tmp_path


def _age(path, seconds):
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_prune_removes_only_old_unlocked_entries_of_other_hashes(private_cache):
    fixtures = private_cache / "fixtures" / "1.20.3"
    current = fixture_dir("1.20.3", "incremental")
    stale = fixtures / "incremental-000000000000"
    recent = fixtures / "savepoints-111111111111"
    locked = fixtures / "hashmap_full-222222222222"
    for d in (current, stale, recent, locked):
        (d / "checkpoints").mkdir(parents=True)
        (d / "COMPLETE").write_text("ok\n")
    for d in (current, stale, locked):
        _age(d / "COMPLETE", 3 * 86_400)
    lock = fixtures / f"{locked.name}.lock"
    with open(lock, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        removed = prune_stale()
    assert removed == [stale]
    assert current.is_dir() and recent.is_dir() and locked.is_dir() and not stale.exists()
    assert prune_stale() == [locked]
