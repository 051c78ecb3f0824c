"""Importing Great Expectations without the optional backends the suite never uses.

`import great_expectations` tries every optional backend it supports (SQLAlchemy and its dialects,
Azure and Google Cloud storage, Spark ML, Spark Connect), each behind a guard that keeps a
"not installed" placeholder when the import fails. The suite uses none of them: Spark computes its
metrics (statekeeper.validate.quality_metrics) and GX only decides, stores and renders them in an
ephemeral context. Installed here, they cost a quarter of the import (on 2 cores, GX's import and
context took 3.3-3.7 s, 2.4-2.8 s without them), CPU the validation job's Spark work is waiting for.

Only the importing thread is refused them, and only during the import: the job's other threads, and
anything imported after, see every installed package as usual.
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any

# Packages GX imports behind its `great_expectations.compatibility` guards.
UNUSED_BACKENDS = ("sqlalchemy", "azure", "google.cloud", "pyspark.ml", "pyspark.sql.connect")


class _HiddenFrom(importlib.abc.MetaPathFinder):
    """Refuses `names` (and their submodules) to one thread's imports."""

    def __init__(self, thread: threading.Thread, names: tuple[str, ...]) -> None:
        self.thread = thread
        self.names = names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if threading.current_thread() is self.thread and any(
                fullname == name or fullname.startswith(name + ".") for name in self.names):
            raise ModuleNotFoundError(f"{fullname} is not imported for great_expectations", name=fullname)
        return None


def import_gx() -> Any:
    """The `great_expectations` module, imported (once per process) without UNUSED_BACKENDS."""
    finder = _HiddenFrom(threading.current_thread(), UNUSED_BACKENDS)
    sys.meta_path.insert(0, finder)
    try:
        import great_expectations
    finally:
        sys.meta_path.remove(finder)
    return great_expectations
