"""Helpers for the compaction tests: a relocated store indexed and validated, compaction runs through
the entry point, and the compactions table."""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tests.harness as harness
from statekeeper.tables import Warehouse
from tests.replicate.support import DrPipeline, listing, local, relocated, table, uri  # noqa: F401 - re-exported

QUIET = ["--progress-interval", "0"]


@dataclass
class CompactPipeline(DrPipeline):
    """Index, chains and validate over the roots, then compact_checkpoints runs; JSON results kept."""

    def compact(self, *args: str, name: str = "compact") -> tuple[int, dict]:
        from spark_jobs.compact_checkpoints import main

        out = self.base / f"{name}-{len(list(self.base.glob(name + '-*.json')))}.json"
        code = main(["--warehouse", self.warehouse.uri, *QUIET, "--result-json", str(out), *args])
        return code, (json.loads(out.read_text()) if out.exists() else {})


def compact_pipeline(spark: Any, base: Path, roots: list[str]) -> CompactPipeline:
    return CompactPipeline(spark, Warehouse(str(base / "warehouse")), roots, base)


def compactions(warehouse: Warehouse, run_id: str) -> list[dict]:
    return [r for r in table(warehouse, "compactions") if r["run_id"] == run_id]


class RestoreBatch:
    """Restore cases collected over a module's tests, proven in ONE JVM (tests/README.md, "Restores in one
    JVM": a JVM start-up per test otherwise). A module-scoped fixture yields one and calls `verify()` at its
    teardown, so the proof runs for whichever of the module's tests ran (-k, --lf), in the process that ran
    them (pytest-xdist --dist loadfile keeps a module on one worker). A test adds its cases only once its
    own assertions passed; a failing restore names the test that added it. Snapshot directories must live
    until the module ends: put them under tmp_path_factory, not tmp_path (whose retention may drop it)."""

    def __init__(self, version: str):
        self.version = version
        self.cases: list[tuple[str, harness.VerifyCase]] = []   # (the adding test's node id, its case)

    def add(self, request: Any, snapshot_dir: Path, scenario: str, job: str | None = "A") -> None:
        self.cases.append((request.node.nodeid, harness.VerifyCase(Path(snapshot_dir), scenario, job)))

    def verify(self) -> None:
        if not self.cases:      # none of the module's adding tests ran (or passed): no JVM to start
            return
        results = harness.verify_restore_many(self.version, [case for _, case in self.cases])
        bad = [(owner, str(case.snapshot_dir), r.output[-2000:])
               for (owner, case), r in zip(self.cases, results, strict=True) if not r.ok]
        assert not bad, bad


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download_store(prefix: str, target: Path, fileio: Any) -> str:
    """Copy every object below `prefix` (e.g. an s3:// store) to the local directory `target`, rewriting
    each `_metadata` so its absolute paths point into the copy (what relocate_store does the other way)."""
    from statekeeper.format import read_metadata, rewrite_prefixes, to_bytes

    local_root = uri(target)
    for info in fileio.list(prefix):
        out = target / info.uri[len(prefix) + 1:]
        out.parent.mkdir(parents=True, exist_ok=True)
        data = fileio.read_bytes(info.uri)
        if out.name == "_metadata":
            model = read_metadata(io.BytesIO(data), info.uri)
            result = rewrite_prefixes(model, {prefix: local_root})
            assert not result.unmapped, result.unmapped[:3]
            data = to_bytes(result.model, inline_source=io.BytesIO(data))
        out.write_bytes(data)
    return local_root
