"""Helpers for the compaction tests: a relocated store indexed and validated, compaction runs through
the entry point, and the compactions table."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
