"""Shared by the orchestration tests: the Airflow plugin imported the way Airflow imports it."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def plugin_module(name: str) -> ModuleType:
    """`statekeeper_airflow.<name>`, with plugins/ on sys.path as Airflow puts it (a top-level package)."""
    plugins = str(REPO / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    return importlib.import_module(f"statekeeper_airflow.{name}")
