"""What setup fetches is what the jobs and the demo use: nothing downloads after it."""
from __future__ import annotations

import re
from pathlib import Path

from statekeeper.dev.demo import DEMO_FLINK_VERSION
from statekeeper.launch.jars import jar_paths, jars_dir, pinned

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_target_prefetches_the_flink_the_demo_runs():
    demo = re.search(r"^demo:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.S | re.M).group(0)
    assert f"STATEKEEPER_FLINK_VERSIONS={DEMO_FLINK_VERSION} $(PY) -m tests.harness.prefetch" in demo, demo


def test_setup_installed_every_pinned_jar_into_this_environment():
    paths = jar_paths()
    names = {Path(p).name for p in paths}
    assert set(pinned()) <= names and all(Path(p).parent == jars_dir() for p in paths)
