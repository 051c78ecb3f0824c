"""Fault injection for the index crash tests (tests/index/test_index_crash.py).

A job started with this directory first on PYTHONPATH loads this module in every Python process it
runs (the driver, which commits the index's change set, and Spark's Python workers). With
`STATEKEEPER_FAULT=<when>:<table>:<how>` it wraps Statekeeper's Delta writes (statekeeper.tables.delta_spark: each
table of the index's change set and the audit row is one `DeltaSparkEngine.write`, committed by `_commit`):

* when: `before` / `after` the commit to <table>, or `raise_after` (the commit lands, then the
  client sees an error, like a lost response);
* how: `kill_all` SIGKILLs the job's whole session (driver, JVM, workers), `raise` raises OSError.

Before firing it writes `STATEKEEPER_FAULT_MARKER`, so a test knows the fault was reached. Nothing
here runs unless the variable is set.
"""
from __future__ import annotations

import os

_FAULT = os.environ.get("STATEKEEPER_FAULT")


def _fire(how: str, what: str) -> None:
    import signal

    marker = os.environ.get("STATEKEEPER_FAULT_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(f"{what} pid={os.getpid()}\n")
    if how == "kill_all":
        _kill_session(signal.SIGKILL)
    raise OSError(f"injected fault: {what}")


def _kill_session(sig: int) -> None:
    """SIGKILL every process of this session (the test starts the job in a new session). Not the
    process group: PySpark's worker daemon puts its workers in a group of their own."""
    sid = os.getsid(0)
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.getsid(int(entry)) == sid:
                os.kill(int(entry), sig)
        except (ProcessLookupError, PermissionError):
            pass
    os.kill(me, sig)


def _install(spec: str) -> None:
    when, table, how = spec.split(":")
    from statekeeper.tables import delta_spark

    write, commit = delta_spark.DeltaSparkEngine.write, delta_spark._commit

    def faulty_write(self, df, warehouse, table_spec, **kwargs):
        if table_spec.name == table and when == "before":
            _fire(how, f"before commit to {table}")
        result = write(self, df, warehouse, table_spec, **kwargs)
        if table_spec.name == table and when == "after":
            _fire(how, f"after commit to {table} (v{result.version})")
        return result

    def faulty_commit(txn, actions, operation, tags):
        version = commit(txn, actions, operation, tags)
        name = str(txn.deltaLog().dataPath().getName())
        if name == table and when == "raise_after":
            _fire("raise", f"error reported after the commit to {table} landed (v{version})")
        return version

    delta_spark.DeltaSparkEngine.write = faulty_write
    delta_spark._commit = faulty_commit


if _FAULT:
    _install(_FAULT)
