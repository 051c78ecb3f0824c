"""Helpers shared by the index tests: run the job, read tables back, build ground truth."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from statekeeper.index.job import IndexCheckpoints, IndexResult
from statekeeper.index.options import IndexOptions
from statekeeper.storage import StorageConfig
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri

TABLES = ("files", "snapshots", "references", "inline_state")


def run_index(spark: Any, roots: list[str], warehouse: str | Warehouse, *, storage: StorageConfig | None = None,
              **options: Any) -> IndexResult:
    """`options`: fields of IndexOptions (e.g. allow_empty_root), else settings of the builder (run_id)."""
    fields = {f.name for f in dataclasses.fields(IndexOptions)}
    job = IndexCheckpoints(spark).warehouse(warehouse).progress_interval(0)
    job = job.storage(storage or StorageConfig())
    for name, value in options.items():
        if name not in fields:
            job = getattr(job, name)(value)
    own = {name: value for name, value in options.items() if name in fields}
    return job.configure(IndexOptions(roots=tuple(roots), **own)).execute()


def table_rows(warehouse: Warehouse, name: str, version: int | None = None) -> list[dict]:
    dt = DeltaTable(warehouse.delta_location(name), version=version, storage_options=warehouse.storage_options())
    return dt.to_pyarrow_table().to_pylist()


def table_version(warehouse: Warehouse, name: str) -> int:
    return DeltaTable(warehouse.delta_location(name), storage_options=warehouse.storage_options()).version()


def canonical(rows: list[dict]) -> list[tuple]:
    """Order-free, comparable form of table rows."""
    def freeze(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted((k, freeze(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        return v
    return sorted((freeze(r) for r in rows), key=repr)


def local_listing(directory: Path) -> dict[str, int]:
    """uri -> size of every regular file below `directory` (what `files` must hold)."""
    out = {}
    for dirpath, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out[normalize_uri(str(path))] = path.stat().st_size
    return out


def fixture_roots(fixture: Any) -> list[Path]:
    return [p for p in (fixture.root / "checkpoints", fixture.root / "savepoints") if p.is_dir()]
