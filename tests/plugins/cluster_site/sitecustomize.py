"""Loaded by every Python process the test cluster's workers start (it is their only PYTHONPATH entry).

A real cluster's Python has pyarrow, deltalake and boto3 but not Statekeeper: the code must come
from what spark-submit ships. This machine's venv, though, has the project installed in editable
mode (a .pth naming a checkout's include/), and a driver could push its own paths through
spark.executorEnv.PYTHONPATH. So:

* every sys.path entry that is a directory holding a `statekeeper` package is dropped, and the
  entries dropped are recorded: an executor can import Statekeeper only from an archive (the zip
  Spark fetched into its work directory and puts on sys.path before running a task);
* each import of `statekeeper` is recorded with the file it came from.

Records are JSON lines in $STATEKEEPER_CLUSTER_IMPORT_LOG/<pid>.jsonl. Nothing happens without
that variable.
"""
from __future__ import annotations

import json
import os
import sys

_LOG_DIR = os.environ.get("STATEKEEPER_CLUSTER_IMPORT_LOG")


def _record(**fields: object) -> None:
    with open(os.path.join(_LOG_DIR, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")


def _holds_package(entry: str) -> bool:
    return os.path.isfile(os.path.join(entry or os.getcwd(), "statekeeper", "__init__.py"))


class _ImportRecorder:
    """A meta path finder that only watches: it records where `statekeeper` is found, then lets the
    regular path finder load it."""

    def find_spec(self, name, path=None, target=None):
        if name != "statekeeper":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None)
        # Spark puts the shipped zip on sys.path relative to the executor's directory ("./x.zip").
        _record(event="import", origin=origin and os.path.abspath(origin), sys_path=list(sys.path))
        return spec


if _LOG_DIR:
    dropped = [p for p in sys.path if _holds_package(p)]
    sys.path[:] = [p for p in sys.path if p not in dropped]
    _record(event="start", argv=sys.argv, dropped=dropped, pythonpath=os.environ.get("PYTHONPATH", ""))
    sys.meta_path.insert(0, _ImportRecorder())
