"""The shipped rules (monitoring/statekeeper.rules.yml): promtool's unit tests of every rule, the thresholds they
fall back to equal statekeeper.metrics.settings', and each alert and metric documented in docs/metrics.md."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from statekeeper.metrics import settings
from statekeeper.metrics.names import METRICS

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "statekeeper.rules.yml"
RULE_TESTS = REPO / "monitoring" / "statekeeper.rules.test.yml"
DOC = REPO / "docs" / "metrics.md"


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is not installed: `make setup` installs Debian's prometheus (it ships promtool)"
    return found


def test_promtool_checks_the_rules():
    proc = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests_pass_and_cover_every_rule_firing_and_not():
    proc = subprocess.run([promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True,
                          timeout=120, cwd=RULE_TESTS.parent)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing, quiet, recorded = set(), set(), set()
    for test in tests:
        for case in test.get("alert_rule_test", ()):
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
        for case in test.get("promql_expr_test", ()):
            recorded.add(case["expr"])
    alerts = {r["alert"] for r in rules() if "alert" in r}
    records = {r["record"] for r in rules() if "record" in r}
    assert firing == alerts and quiet == alerts, (alerts - firing, alerts - quiet)
    assert recorded == records, records - recorded


def test_the_rules_defaults_are_the_settings_defaults():
    from statekeeper.units import parse_duration

    seconds = {name: parse_duration(text).total_seconds() for name, text in
               {"index": settings.INDEX_AGE_TEXT, "gc": settings.GC_AGE_TEXT, "dr": settings.DR_RPO_TEXT}.items()}
    defaults = {}
    for rule in rules():
        match = re.search(r"\* 0 \+ (\d+)\s*\)\s*$", rule.get("expr", ""))
        if match:
            defaults[rule["alert"]] = float(match.group(1))
    assert defaults == {"StatekeeperDrRpoHigh": seconds["dr"], "StatekeeperIndexStale": seconds["index"],
                        "StatekeeperGcStale": seconds["gc"], "StatekeeperDrFollowRefusing": settings.FOLLOW_REFUSALS}
    # and each rule with a default reads the threshold a run pushes
    thresholds = {"StatekeeperDrRpoHigh": "statekeeper_threshold_dr_rpo_seconds",
                  "StatekeeperIndexStale": "statekeeper_threshold_index_age_seconds",
                  "StatekeeperGcStale": "statekeeper_threshold_gc_age_seconds",
                  "StatekeeperDrFollowRefusing": "statekeeper_threshold_follow_refusals"}
    for rule in rules():
        if rule.get("alert") in thresholds:
            assert thresholds[rule["alert"]] in rule["expr"], rule["alert"]


def test_rules_use_only_exported_metrics():
    known = {m.name for m in METRICS}
    for rule in rules():
        used = set(re.findall(r"\bstatekeeper_[a-z_]+", rule["expr"]))
        assert used <= known, (rule.get("alert") or rule.get("record"), used - known)


def test_docs_list_every_metric_with_its_source_and_every_alert_with_a_runbook():
    text = DOC.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(statekeeper_[a-z_]+)` \|.*$", text, re.MULTILINE)}
    assert set(rows) == {m.name for m in METRICS}, set(rows) ^ {m.name for m in METRICS}
    for metric in METRICS:
        row = rows[metric.name]
        assert metric.source in row, (metric.name, metric.source)
        assert metric.kind.value in row, metric.name
        for label in metric.labels:
            assert f"`{label}`" in row, (metric.name, label)
    for rule in rules():
        if "alert" in rule:
            assert re.search(rf"^### {rule['alert']}$", text, re.MULTILINE), rule["alert"]
            anchor = rule["annotations"]["runbook"].split("#", 1)[1]
            assert anchor == rule["alert"].lower(), rule["alert"]
            section = text.split(f"### {rule['alert']}\n", 1)[1].split("\n### ", 1)[0]
            for part in ("**Means.**", "**Check.**", "**More.**"):
                assert part in section, (rule["alert"], part)


@pytest.mark.parametrize("path", [RULES, RULE_TESTS])
def test_rule_files_are_yaml(path):
    assert yaml.safe_load(path.read_text())
