"""What a generated store must hold for the tests its scenario exists for, checked right after generation.

Some cases depend on timing inside Flink: whether ForSt compacts after a failover decides whether the
failed-over job's first databases hold files no checkpoint uses any more; whether a restored job checkpoints
before it has processed the data it restored depends on how fast it processes it. A store generated without its
case is generated again (tests/harness/clustered.py, recovering.py) instead of being cached, where it would fail
its test on every later run. Not part of any fixture's fingerprint: a check decides whether a store is kept,
never what it holds.
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


def _restored_job_checkpointed_during_recovery(version: str, manifest: dict) -> str | None:
    """The recovery_checkpoints scenario exists for checkpoints a restored job completed while it still processed
    the in-flight data it restored (FLIP-547), and for GC and DR acting on such checkpoints: every retained
    checkpoint of the restored job must have been taken during its recovery (its newest is, then all are) and one
    must have completed during it. Whether they were depends on how fast Flink processes the restored data; the
    snapshots' own operator state says (recovering.py, RecoveryGenerate.java)."""
    for job in manifest["jobs"]:
        if not job["restored_from"]:
            continue
        recovery = job["recovery"]
        if recovery["restored_in_flight_elements"] <= 0:
            return f"job {job['name']} restored a snapshot with nothing in flight: {recovery}"
        newest = recovery["retained_checkpoints"][-1]
        if not newest["taken_during_recovery"]:
            return (f"job {job['name']}'s newest checkpoint {newest['id']} was taken after its recovery (tally count "
                    f"{newest['tally_count']} >= {recovery['restored_gate_next']} elements restored)")
        if not recovery["completed_during_recovery"]:
            return f"job {job['name']} completed no checkpoint during its recovery: {recovery}"
    return None


# scenario -> check of a freshly generated store: None, or what it lacks
PROMISES: dict[str, Callable[[str, dict], str | None]] = {
    "forst": _forst_superseded_database_has_dead_files,
    "recovery_checkpoints": _restored_job_checkpointed_during_recovery,
}
