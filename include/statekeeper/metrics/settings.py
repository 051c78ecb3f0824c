"""What a run pushes besides its figures: the Pushgateway job label and the alert thresholds.

Standard library only: the DAGs' forms read the defaults when they are parsed. The thresholds are
deployment settings (Airflow Variables `statekeeper_alert_*`, a manual run's form); a run pushes them as
`statekeeper_threshold_*` gauges and monitoring/statekeeper.rules.yml compares with those, falling back to the
same defaults written into the rules where a warehouse pushed none. One place to change a threshold: Airflow.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Mapping

from statekeeper.units import DurationError, format_duration, parse_duration

DEFAULT_JOB_LABEL = "statekeeper"

# Defaults: the rules file carries the same numbers (tests/metrics/test_rules.py keeps them equal).
# The nightly maintenance run at 02:00 leaves two hours of slack before its successor is late.
INDEX_AGE_TEXT = "26h"
GC_AGE_TEXT = "26h"
# The DR follow DAG copies every 5 minutes; an hour is a dozen missed rounds.
DR_RPO_TEXT = "1h"
FOLLOW_REFUSALS = 3

# Each threshold: the Variable a deployment sets and the form field a manual run may override it with.
VARIABLES = {
    "index_age": "statekeeper_alert_index_age",
    "gc_age": "statekeeper_alert_gc_age",
    "dr_rpo": "statekeeper_alert_dr_rpo",
    "follow_refusals": "statekeeper_alert_follow_refusals",
}


class ThresholdError(ValueError):
    """A threshold setting that is not one; the message names the setting and what it takes."""


@dataclass(frozen=True)
class Thresholds:
    index_age: timedelta = field(default_factory=lambda: parse_duration(INDEX_AGE_TEXT))
    gc_age: timedelta = field(default_factory=lambda: parse_duration(GC_AGE_TEXT))
    dr_rpo: timedelta = field(default_factory=lambda: parse_duration(DR_RPO_TEXT))
    follow_refusals: int = FOLLOW_REFUSALS

    @classmethod
    def parse(cls, values: Mapping[str, object]) -> tuple[Thresholds, list[str]]:
        """Thresholds from settings as rendered (text; empty or missing: the default). A value that does not
        parse keeps the default and is named in the returned problems (the run logs them and still pushes:
        a typo in a threshold must not silence every figure)."""
        chosen: dict[str, object] = {}
        problems: list[str] = []
        for f in fields(cls):
            raw = str(values.get(f.name) if values.get(f.name) is not None else "").strip()
            if not raw:
                continue
            try:
                chosen[f.name] = _parse(f.name, raw)
            except ThresholdError as exc:
                problems.append(f"{exc}; using the default {_text(getattr(cls(), f.name))}")
        return cls(**chosen), problems  # type: ignore[arg-type]

    def describe(self) -> str:
        return ", ".join(f"{f.name} {_text(getattr(self, f.name))}" for f in fields(self))


def _parse(name: str, raw: str) -> object:
    what = f"threshold {name} (Variable {VARIABLES[name]})"
    if name == "follow_refusals":
        if not raw.isdigit() or int(raw) < 1:
            raise ThresholdError(f"{what}: {raw!r} is not a whole number of rounds >= 1")
        return int(raw)
    try:
        value = parse_duration(raw, what)
    except DurationError as exc:
        raise ThresholdError(str(exc)) from None
    if value <= timedelta(0):
        raise ThresholdError(f"{what}: {raw!r} must be longer than 0")
    return value


def _text(value: object) -> str:
    return format_duration(value) if isinstance(value, timedelta) else str(value)
