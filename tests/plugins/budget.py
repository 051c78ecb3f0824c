"""The suite's time budget, printed at the end of every run (CI included).

`make test` must stay within 30 minutes warm and 40 cold on 2 cores (tests/README.md): CI stops a
run at 90 minutes and then nothing lands. So every run ends with its wall time against that budget,
the ten slowest tests and the ten slowest modules (setup + call + teardown; a module's shared
fixtures show up in the setup of its first test; with TEST_WORKERS=2 they add up to about twice the
wall time), and writes every figure to `.artifacts/test-times.json` for comparing two runs. Session
fixtures (a prepared pipeline, a server) are charged to the first test that asks for them, as pytest
itself does.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

BUDGET_WARM_S = 30 * 60
BUDGET_COLD_S = 40 * 60
SHOWN = 10
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"


class Budget:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.tests: dict[str, float] = defaultdict(float)
        self.outcomes: dict[str, str] = {}

    def record(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] += report.duration
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = report.outcome

    def modules(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.tests.items():
            out[nodeid.split("::", 1)[0]] += seconds
        return out


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


_budget: Budget | None = None    # one per session; logreport hooks get no config to find it on


def pytest_configure(config: pytest.Config) -> None:
    global _budget
    # Under pytest-xdist (TEST_WORKERS=2) the controller receives every worker's reports and prints the
    # figures; a worker keeps none, or it would overwrite the controller's file with its share.
    if not hasattr(config, "workerinput"):
        _budget = Budget()


def _workers(config: pytest.Config) -> int:
    return int(getattr(config.option, "numprocesses", None) or 1)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _budget is not None:
        _budget.record(report)


@pytest.hookimpl(trylast=True)   # after pytest's own summaries: the last lines a CI log shows
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    budget = _budget
    if budget is None or not budget.tests:
        return
    wall = time.monotonic() - budget.started
    tr = terminalreporter
    tr.section("time budget")
    tr.write_line(f"{len(budget.tests)} tests in {_clock(wall)} wall (pytest, {_workers(config)} worker(s)); "
                  f"make test's budget on 2 cores: "
                  f"{_clock(BUDGET_WARM_S)} warm, {_clock(BUDGET_COLD_S)} cold (tests/README.md)")
    tr.write_line(f"{SHOWN} slowest tests (setup + call + teardown; shared fixtures count where first used):")
    for nodeid, seconds in sorted(budget.tests.items(), key=lambda kv: -kv[1])[:SHOWN]:
        tr.write_line(f"  {seconds:7.1f}s  {nodeid}")
    tr.write_line(f"{SHOWN} slowest modules:")
    for module, seconds in sorted(budget.modules().items(), key=lambda kv: -kv[1])[:SHOWN]:
        tr.write_line(f"  {seconds:7.1f}s  {module}")
    try:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "test-times.json").write_text(json.dumps({
            "wall_s": round(wall, 1), "exit_status": int(exitstatus), "cpus": os.cpu_count(),
            "workers": _workers(config),
            "tests": {k: round(v, 2) for k, v in sorted(budget.tests.items())},
            "modules": {k: round(v, 2) for k, v in sorted(budget.modules().items())},
        }, indent=1))
    except OSError as exc:   # a read-only checkout still gets the printed figures
        tr.write_line(f"(could not write {ARTIFACTS / 'test-times.json'}: {exc})")
