"""Importing Great Expectations without the optional backends the suite never uses.

`import great_expectations` tries every optional backend it supports (SQLAlchemy and its dialects,
Azure and Google Cloud storage, Spark ML, Spark Connect), each behind a guard that keeps a
"not installed" placeholder when the import fails. The suite uses none of them: Spark computes its
metrics (statekeeper.validate.quality_metrics) and GX only decides, stores and renders them in an
ephemeral context. Installed here, they cost a quarter of the import (on 2 cores, GX's import and
context took 3.3-3.7 s, 2.4-2.8 s without them), CPU the validation job's Spark work is waiting for.

Only the importing thread is refused them, and only during the import: the job's other threads, and
anything imported after, see every installed package as usual.

Two more packages are imported but never used by the suite: SciPy's statistics and Altair, by the module of
the KL-divergence expectation (which every GX import loads with all the others). Unlike the backends they are
imported without a guard, so they cannot be refused; their code runs on first use instead (`LAZY_MODULES`,
`lazily`): GX gets the module objects, and whatever first reads an attribute of one loads it then, in full.
`python -X importtime` of `import_gx()` here: 2.0 s, of which SciPy 0.5 s and Altair 0.07 s of their own, and
Google's API client (a guarded backend) 0.13 s; 1.2 s without them.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import types
from typing import Any

# Packages GX imports behind its `great_expectations.compatibility` guards.
UNUSED_BACKENDS = ("sqlalchemy", "azure", "google.cloud", "google.api_core", "google.auth", "pyspark.ml",
                   "pyspark.sql.connect")
# Imported unguarded by expectations the suite does not use: loaded on first use instead of with GX.
LAZY_MODULES = ("scipy.stats", "altair")


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


class _RunOnFirstUse(types.ModuleType):
    """A module whose code runs when something first reads one of its attributes. What an `import` statement
    reads of a module already in sys.modules (`__spec__`, to see whether it is still initializing) does not
    count: `importlib.util.LazyLoader`'s modules load right there on Python 3.11, so a second `import` of one
    loaded it, and GX imports SciPy's statistics through SciPy's own `import_module`.

    The code runs under the module's own lock: another thread's first read waits for it, while the loading
    thread's reads (its submodules' imports) see the module as it is so far, as an import would show it."""

    def __getattribute__(self, attr: str) -> Any:
        if attr in _IMPORT_READS:
            return super().__getattribute__(attr)
        key = id(self)
        with _LOCKS.setdefault(key, threading.RLock()):
            if type(self) is _RunOnFirstUse:
                if key in _RUNNING:   # the loading thread itself
                    return super().__getattribute__(attr)
                _RUNNING.add(key)
                try:
                    _run(self)
                finally:
                    _RUNNING.discard(key)
                self.__class__ = types.ModuleType
        return getattr(self, attr)


_IMPORT_READS = frozenset({"__spec__", "__name__", "__class__", "__dict__"})
_LOCKS: dict[int, Any] = {}
_RUNNING: set[int] = set()


def _run(module: types.ModuleType) -> None:
    """Run a deferred module's code; if it fails, forget the module, so that the next import starts afresh."""
    spec = object.__getattribute__(module, "__spec__")
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if sys.modules.get(spec.name) is module:
            del sys.modules[spec.name]
        parent, _, child = spec.name.rpartition(".")
        if parent and parent in sys.modules and sys.modules[parent].__dict__.get(child) is module:
            delattr(sys.modules[parent], child)
        raise


def lazily(name: str) -> None:
    """Put `name` in sys.modules (and on its parent package, as an import would) as a module whose code runs on
    its first use, unless it is imported already or not installed (then the importer's own `import` does what
    it would have done)."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _RunOnFirstUse
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def import_gx() -> Any:
    """The `great_expectations` module, imported (once per process) without UNUSED_BACKENDS, and with
    LAZY_MODULES loaded only if something uses them."""
    if "great_expectations" not in sys.modules:
        for name in LAZY_MODULES:
            lazily(name)
    finder = _HiddenFrom(threading.current_thread(), UNUSED_BACKENDS)
    sys.meta_path.insert(0, finder)
    try:
        import great_expectations
    finally:
        sys.meta_path.remove(finder)
    return great_expectations
