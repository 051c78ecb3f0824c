"""What a generated store must hold for the tests its scenario exists for, checked right after generation.

Some cases depend on timing inside Flink: whether ForSt compacts after a failover decides whether the
failed-over job's first databases hold files no checkpoint uses any more. A store generated without its case
is generated again (tests/harness/clustered.py) instead of being cached, where it would fail its test on every
later run. Not part of any fixture's fingerprint: a check decides whether a store is kept, never what it holds.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from tests.harness.oracle import run_oracle


def _forst_superseded_database_has_dead_files(version: str, manifest: dict) -> str | None:
    """The forst scenario exists for a failed-over job whose first databases (attempt 0) hold files that
    no job's newest checkpoint uses any more (tests/flink2/test_flink2_gc.py deletes exactly those).
    Whether they do depends on ForSt compacting after the failover; Flink's own reading decides."""
    newest = [Path(j["retained_checkpoints"][-1]) / "_metadata" for j in manifest["jobs"]]
    readings = run_oracle(version, newest)
    unreadable = [r for r in readings if "error" in r]
    if unreadable:
        return f"Flink cannot read its own newest checkpoints: {unreadable}"
    used = {_local_path(f["path"]) for r in readings for f in r["referenced_files"]}
    superseded = [Path(db["dir"]) for j in manifest["jobs"] for db in j.get("forst_databases", [])
                  if db["attempt"] == 0 and any(d["attempt"] > 0 for d in j["forst_databases"])]
    if not superseded:
        return "no job failed over (no database of attempt 1 beside one of attempt 0)"
    dead = [f for d in superseded for f in d.rglob("*") if f.is_file() and f.resolve() not in used]
    return None if dead else f"every file of the attempt-0 databases {[d.name for d in superseded]} is still used"


def _local_path(uri: str) -> Path:
    """A local file the oracle names (`file:/x`, `file:///x` or `/x`; Flink writes such paths verbatim)."""
    path = uri.removeprefix("file:")
    return Path("/" + path.lstrip("/")).resolve()


# scenario -> check of a freshly generated store: None, or what it lacks
PROMISES: dict[str, Callable[[str, dict], str | None]] = {"forst": _forst_superseded_database_has_dead_files}
