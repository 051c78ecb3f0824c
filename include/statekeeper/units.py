"""Durations and sizes as every layer spells them: parsed from options, printed in summaries.

Standard library only, on the ground floor: the tables layer (warehouse maintenance), the jobs,
their entry points and the DAGs all read and print durations and sizes, and none of them should
import another job to do so.
"""
from __future__ import annotations

import re
from datetime import timedelta

from statekeeper.errors import ConfigurationError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)
_BYTES = {"b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": MiB, "mb": MiB, "mib": MiB, "g": GiB, "gb": GiB, "gib": GiB}


class DurationError(ConfigurationError, ValueError):
    """A duration option that is not one (exit 2): the message shows the accepted spellings."""


class SizeError(ConfigurationError, ValueError):
    """A size option that is not one (exit 2): the message shows the accepted spellings."""


def parse_duration(text: str, what: str = "duration", error: type[ConfigurationError] = DurationError) -> timedelta:
    """`90s`, `30m`, `12h`, `3d`, `2w`; a bare number is hours. `error` is the type raised (a job's own
    options error, so that its callers catch one type)."""
    match = _DURATION.match(text or "")
    if not match:
        raise error(f"{what}: {text!r} is not a duration; use e.g. 90s, 30m, 12h, 3d or 2w")
    return timedelta(seconds=float(match.group(1)) * _SECONDS[(match.group(2) or "h").lower()])


def format_duration(value: timedelta) -> str:
    """The shortest spelling `parse_duration` reads back: whole weeks, days, hours or minutes, else seconds."""
    seconds = value.total_seconds()
    for unit in ("w", "d", "h", "m"):
        if seconds >= _SECONDS[unit] and seconds % _SECONDS[unit] == 0:
            return f"{int(seconds // _SECONDS[unit])}{unit}"
    return f"{seconds:g}s"


def parse_size(text: str) -> int:
    """`4096`, `64KiB`, `64MiB`, `1GiB` (k/kb/kib alike: binary units); a bare number is bytes."""
    match = _SIZE.match(text or "")
    if not match:
        raise SizeError(f"{text!r} is not a size; use e.g. 4096, 64KiB, 64MiB, 1GiB")
    return int(float(match.group(1)) * _BYTES[(match.group(2) or "b").lower()])


def human_size(n: float | None) -> str:
    """Bytes as summaries and reports print them: 512 B, 1.5 KiB, ... 2.0 EiB ("?" when unknown)."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
