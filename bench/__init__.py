"""Statekeeper benchmarks: `python -m bench` runs all, `python -m bench NAME [args]` one.

Each module in this package with `NAME`, `DESCRIPTION` and `main(argv) -> int` is a benchmark.
Benchmarks print ratios against a baseline measured in the same run (never absolute timings in
assertions); generated inputs live under $STATEKEEPER_CACHE/bench, never in the repository.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("STATEKEEPER_CACHE", Path.home() / ".cache" / "statekeeper"))
    path = root.joinpath("bench", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def benchmarks() -> dict:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if all(hasattr(module, a) for a in ("NAME", "DESCRIPTION", "main")):
            found[module.NAME] = module
    return found
