"""Helpers for the DR copy tests: a source store indexed and validated, and DR runs through the entry point."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekeeper.tables import Warehouse
from tests.gc.support import Pipeline, listing, local, relocated, uri  # noqa: F401 - re-exported for the tests

QUIET = ["--progress-interval", "0"]


@dataclass
class DrPipeline(Pipeline):
    """Index, chains and validate over the source roots, then copy_to_dr runs; JSON results kept."""

    def validate(self) -> int:
        from spark_jobs.validate_checkpoints import main

        return main(["--warehouse", self.warehouse.uri, "--roots", ",".join(self.roots), "--no-quality-suite",
                     *QUIET])

    def prepare(self) -> None:
        """Index, chains and validate, as the maintenance DAG runs them before the DR copy."""
        self.refresh()
        assert self.validate() in (0, 1)

    def dr(self, *args: str, name: str = "dr") -> tuple[int, dict]:
        from spark_jobs.copy_to_dr import main

        out = self.base / f"{name}-{len(list(self.base.glob(name + '-*.json')))}.json"
        code = main(["--warehouse", self.warehouse.uri, *QUIET, "--result-json", str(out), *args])
        return code, (json.loads(out.read_text()) if out.exists() else {})


def dr_pipeline(spark: Any, base: Path, roots: list[str]) -> DrPipeline:
    return DrPipeline(spark, Warehouse(str(base / "warehouse")), roots, base)


def table(warehouse: Warehouse, name: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(warehouse.delta_location(name)).to_pyarrow_table().to_pylist()


def copies(warehouse: Warehouse, run_id: str) -> list[dict]:
    return [r for r in table(warehouse, "dr_copies") if r["run_id"] == run_id]
