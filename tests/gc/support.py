"""Helpers for the GC tests: relocated harness stores, the full pipeline up to GC, listings."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store, store_roots
from tests.index.support import run_index

SHORT = ["--older-than", "1s", "--allow-short-grace"]


def uri(p: Path | str) -> str:
    return normalize_uri(str(p))


def local(u: str) -> Path:
    return Path(u[len("file://"):])


def listing(roots: list[str]) -> dict[str, int]:
    """Every regular file under the local roots (uri -> size); symlinks are never followed."""
    out = {}
    for root in roots:
        for dirpath, _dirs, names in os.walk(local(root)):
            for name in names:
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    out[uri(p)] = p.stat().st_size
    return out


@dataclass
class Pipeline:
    """One warehouse over some roots: index, chains and GC runs through the entry points."""

    spark: Any
    warehouse: Warehouse
    roots: list[str]
    base: Path

    def index(self) -> Any:
        result = run_index(self.spark, self.roots, self.warehouse)
        return result

    def chains(self) -> int:
        from spark_jobs.compute_chains import main

        return main(["--warehouse", self.warehouse.uri, "--progress-interval", "0"])

    def gc(self, *args: str, name: str = "gc") -> tuple[int, dict]:
        from spark_jobs.collect_garbage import main

        out = self.base / f"{name}-{len(list(self.base.glob(name + '-*.json')))}.json"
        code = main(["--warehouse", self.warehouse.uri, "--progress-interval", "0", "--result-json", str(out),
                     *args])
        return code, (json.loads(out.read_text()) if out.exists() else {})

    def refresh(self) -> None:
        """Index and chains, as the DAG runs them before GC."""
        result = self.index()
        assert result.status == "succeeded", result.summary()
        assert self.chains() == 0


def pipeline(spark: Any, base: Path, copies: list[str]) -> Pipeline:
    roots = [r for c in copies for r in store_roots(c)]
    return Pipeline(spark, Warehouse(str(base / "warehouse")), roots, base)


def relocated(fixture: Any, target: Path) -> str:
    return relocate_store(fixture.root, str(target))


def rewrite_keeping_mtime(metadata: Path, mapping: dict[str, str]) -> None:
    """Rewrite the paths in `metadata`, keeping its mtime (GC compares data files' times with it)."""
    before = metadata.stat()
    from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes

    model = read_metadata(metadata, uri(metadata))
    result = rewrite_prefixes(model, mapping)
    metadata.write_bytes(to_bytes(result.model, inline_source=metadata))
    os.utime(metadata, ns=(before.st_atime_ns, before.st_mtime_ns))


def flink_times(fixture_root: Path, copy_root: Path) -> None:
    """Give every file of a relocated copy the mtime Flink's run gave the original: the order in which the
    job wrote its files and `_metadata` is what tells a claimed checkpoint's files from older ones."""
    for path in copy_root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            original = (fixture_root / path.relative_to(copy_root)).stat()
            os.utime(path, ns=(original.st_atime_ns, original.st_mtime_ns))


def split_old_job(fixture: Any, base: Path, job: str = "A") -> tuple[Path, Path]:
    """A relocated copy of `fixture` under `base/deployB` with `job`'s directory moved to its own root
    `base/deployA/checkpoints` (one root per deployment), every `_metadata` rewritten to the new places and every
    file keeping the time Flink wrote it. Returns (the copy's store root, the moved job directory)."""
    import shutil

    store = local(relocated(fixture, base / "deployB"))
    flink_times(fixture.root, store)
    job_id = fixture.job(job)["job_id"]
    old, new = store / "checkpoints" / job_id, base / "deployA" / "checkpoints" / job_id
    new.parent.mkdir(parents=True)
    shutil.move(old, new)
    for metadata in sorted(store.rglob("_metadata")) + sorted(new.rglob("_metadata")):
        rewrite_keeping_mtime(metadata, {uri(old): uri(new)})
    return store, new


def actions(warehouse: Warehouse, run_id: str) -> list[dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(warehouse.delta_location("gc_actions")).to_pyarrow_table().to_pylist()
    return [r for r in rows if r["run_id"] == run_id]


def runs(warehouse: Warehouse) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(warehouse.delta_location("gc_runs")).to_pyarrow_table().to_pylist()


def retained_cases(fixture: Any, copy: str) -> list[tuple[Path, str, str]]:
    """(snapshot dir in the copy, scenario, job) of every retained checkpoint and savepoint."""
    old = uri(fixture.root)

    def moved(p: str) -> Path:
        return local(copy + uri(p)[len(old):])

    cases = []
    for job in fixture.manifest["jobs"]:
        for d in job["retained_checkpoints"]:
            cases.append((moved(d), fixture.scenario, job["name"]))
    for sp in fixture.manifest.get("savepoints", []):
        cases.append((moved(sp["dir"]), fixture.scenario, sp["job"]))
    return cases
