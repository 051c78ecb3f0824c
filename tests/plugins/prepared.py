"""Prepared stores: a relocated harness store with its pipeline run once per session, checked out cheaply.

Many tests start from the same state: a relocated copy of a cached harness store, indexed, chained and
validated (the DR copy, GC and compaction tests), and then damage, copy or delete something. Building
that state costs a relocation and three Spark jobs; a checkout of it costs hard links and a copy of a
small warehouse:

* `prepared_store(scenario, version=None)` (session fixture, a callable) builds the state once per
  session: the store is relocated to `<base>/work/src` (its `_metadata` name that place), the
  pipeline's tables go to `<base>/work/warehouse`, then `work/` is renamed to `golden/`.
* `Prepared.checkout(tmp_path)` puts it back at `<base>/work`: every file of the store hard-linked
  (same inode, mtime and size, so the local fingerprint the tables recorded still matches and nothing
  looks changed), every directory new, the warehouse copied. A test may delete, rename or add files
  there, and run the pipeline again; `tmp_path` holds its own outputs (targets, result JSON).
* A hard link shares its inode: a test must never write into a checked-out file in place (truncate,
  `write_bytes` over it, `os.utime`). `replace_bytes` writes a new file under the old name. Each
  checkout first checks every golden file's inode, size and mtime and fails naming the test that held
  the previous checkout if one was changed, so such a test cannot silently spoil the next one.

One checkout of a store at a time: a new checkout replaces the previous one, whose test must be done
with it (tests run one after another; a module-scoped checkout lasts until its module ends, so two
modules never hold one at once).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri


@dataclass
class Checkout:
    """One materialization of a prepared store at its place."""

    fixture: Any                 # the harness Fixture the store was relocated from
    src: str                     # the relocated store (file:// URI); roots are its checkpoints/ and savepoints/
    pipeline: Any                # tests.replicate.support.DrPipeline over the checkout, results under tmp_path

    @property
    def store(self) -> Path:
        return Path(self.src[len("file://"):])

    def moved(self, path: str | Path) -> Path:
        """Where a path of the cached fixture is in this checkout."""
        old = normalize_uri(str(self.fixture.root))
        return Path((self.src + normalize_uri(str(path))[len(old):])[len("file://"):])


def replace_bytes(path: Path, data: bytes) -> None:
    """Write `data` as a new file under `path`: a checked-out file is a hard link to the prepared one."""
    tmp = path.with_name(path.name + ".replacing")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass
class Prepared:
    scenario: str
    version: str
    base: Path
    fixture: Any
    spark: Any
    _stats: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    _owner: str = "(none)"

    @property
    def golden(self) -> Path:
        return self.base / "golden"

    @property
    def work(self) -> Path:
        return self.base / "work"

    def _pipeline(self, out: Path) -> Any:
        from tests.replicate.support import DrPipeline

        src = normalize_uri(str(self.work / "src"))
        return DrPipeline(self.spark, Warehouse(str(self.work / "warehouse")), [f"{src}/checkpoints", f"{src}/savepoints"],
                          out)

    def build(self) -> None:
        from tests.gc.support import relocated

        relocated(self.fixture, self.work / "src")
        self._pipeline(self.base).prepare()
        os.rename(self.work, self.golden)
        self._stats = _stats(self.golden / "src")

    def checkout(self, tmp_path: Path, owner: str) -> Checkout:
        changed = [p for p, st in _stats(self.golden / "src").items() if self._stats.get(p) != st]
        changed += [p for p in self._stats if not (self.golden / "src" / p).exists()]
        assert not changed, (f"the prepared {self.scenario} store of Flink {self.version} was changed through a hard "
                             f"link by {self._owner} (write new files with tests.plugins.prepared.replace_bytes): "
                             f"{sorted(changed)[:5]}")
        shutil.rmtree(self.work, ignore_errors=True)
        _link_tree(self.golden / "src", self.work / "src")
        shutil.copytree(self.golden / "warehouse", self.work / "warehouse", symlinks=True)
        self._owner = owner
        return Checkout(self.fixture, normalize_uri(str(self.work / "src")), self._pipeline(tmp_path))


def _stats(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _link_tree(src: Path, dst: Path) -> None:
    for dirpath, dirs, names in os.walk(src):
        target = dst / os.path.relpath(dirpath, src)
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            os.link(os.path.join(dirpath, name), target / name)


@pytest.fixture(scope="session")
def prepared_store(spark, flink_fixture, tmp_path_factory) -> Callable[..., Prepared]:
    """Callable (scenario, version=None: the newest harness version) -> Prepared, built once per session."""
    import tests.harness as harness

    built: dict[tuple[str, str], Prepared] = {}

    def get(scenario: str, version: str | None = None) -> Prepared:
        key = (scenario, version or harness.FLINK_VERSIONS[-1])
        if key not in built:
            base = tmp_path_factory.mktemp(f"prepared-{key[0]}-{key[1]}")
            prepared = Prepared(key[0], key[1], base, flink_fixture(key[1], key[0]), spark)
            prepared.build()
            built[key] = prepared
        return built[key]

    return get
