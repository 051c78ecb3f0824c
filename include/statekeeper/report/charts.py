"""The report's charts as static inline SVG (matplotlib's SVG backend).

Static SVG keeps the page self-contained without a script: nothing to fetch at view time, nothing
to execute, and the text stays text (`svg.fonttype = none`), so the browser's search and the tests
find labels. Figures are built with the object API (no pyplot): no global state, safe in threads.
"""
from __future__ import annotations

import io
import re
from typing import Sequence

from statekeeper.report.model import JobStorage, MetadataPoint, TrendPoint

OWN, PINNED, RECLAIMABLE, INLINE = "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"
_RC = {"svg.fonttype": "none", "svg.hashsalt": "statekeeper", "font.size": 9, "font.family": "sans-serif",
       "axes.spines.top": False, "axes.spines.right": False}
_PROLOGUE = re.compile(rb"^.*?(?=<svg)", re.S)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig, label: str) -> str:
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = _PROLOGUE.sub(b"", buf.getvalue(), count=1).decode()
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def prepare() -> None:
    """Import matplotlib and draw an empty figure once (the font cache loads on the first text drawn):
    0.4-0.5 s the report job does in a thread while Spark aggregates, instead of before its first chart."""
    _svg(_figure(1, 1), "")


def short(job_dir: str, width: int = 12) -> str:
    return job_dir if len(job_dir) <= width else job_dir[:width - 1] + "…"


def mib(n: float) -> float:
    return n / 2**20


def storage_bars(rows: Sequence[JobStorage], limit: int = 20) -> str:
    """Stacked horizontal bars per directory: own, pinned by other jobs, reclaimable; inline as a marker."""
    import matplotlib

    rows = list(rows)[:limit]
    with matplotlib.rc_context(_RC):
        fig = _figure(9, 0.6 + 0.28 * max(len(rows), 1))
        ax = fig.add_subplot()
        labels = [short(r.job_dir) for r in rows][::-1]
        own = [mib(r.own_bytes) for r in rows][::-1]
        pinned = [mib(r.pinned_bytes) for r in rows][::-1]
        reclaim = [mib(r.reclaimable_bytes) for r in rows][::-1]
        inline = [mib(r.inline_bytes) for r in rows][::-1]
        ax.barh(labels, own, color=OWN, label="own")
        ax.barh(labels, pinned, left=own, color=PINNED, label="pinned by other jobs")
        ax.barh(labels, reclaim, left=[a + b for a, b in zip(own, pinned)], color=RECLAIMABLE, label="reclaimable (GC plan)")
        ax.scatter(inline, labels, marker="|", s=120, color=INLINE, label="inline in _metadata", zorder=3)
        ax.set_xlabel("MiB")
        fig.legend(loc="outside upper center", frameon=False, fontsize=8, ncols=4)
        return _svg(fig, "storage per job directory")


def trend_lines(points: Sequence[TrendPoint]) -> str:
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = _figure(9, 2.6)
        ax = fig.add_subplot()
        x = list(range(len(points)))
        for values, color, label in (([mib(p.total_bytes) for p in points], OWN, "total"),
                                     ([mib(p.pinned_bytes) for p in points], PINNED, "pinned by other jobs"),
                                     ([mib(p.reclaimable_bytes) for p in points], RECLAIMABLE, "reclaimable"),
                                     ([mib(p.inline_bytes) for p in points], INLINE, "inline in _metadata")):
            ax.plot(x, values, marker="o", markersize=3, color=color, label=label)
        ax.set_xticks(x, [p.at.strftime("%m-%d %H:%M") for p in points], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("MiB")
        fig.legend(loc="outside upper center", frameon=False, fontsize=8, ncols=4)
        return _svg(fig, "storage over the last report runs")


def metadata_lines(points: Sequence[MetadataPoint]) -> str:
    """`_metadata` size (solid) and its inline part (dashed) per checkpoint, one colour per job."""
    import matplotlib

    jobs: dict[tuple[str, str], list[MetadataPoint]] = {}
    for p in points:
        jobs.setdefault((p.root, p.job_dir), []).append(p)
    with matplotlib.rc_context(_RC):
        fig = _figure(9, 3.0)
        ax = fig.add_subplot()
        palette = matplotlib.colormaps["tab10"]
        for i, ((_, job_dir), series) in enumerate(sorted(jobs.items())):
            series.sort(key=lambda p: p.checkpoint_id if p.checkpoint_id is not None else -1)
            x = [p.checkpoint_id for p in series]
            ax.plot(x, [p.metadata_bytes / 1024 for p in series], color=palette(i % 10), marker=".",
                    label=short(job_dir))
            ax.plot(x, [p.inline_bytes / 1024 for p in series], color=palette(i % 10), linestyle="--")
        ax.set_xlabel("checkpoint id")
        ax.set_ylabel("KiB (solid: _metadata, dashed: inline)")
        if jobs:
            fig.legend(loc="outside upper center", frameon=False, fontsize=8, ncols=min(len(jobs), 8))
        return _svg(fig, "_metadata size and inline state per checkpoint")


def age(seconds: float | None) -> str:
    """A duration as people read an RPO: the two largest units ("4m 12s", "3h 5m", "2d 1h")."""
    if seconds is None:
        return ""
    left = max(0, int(round(seconds)))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
    return " ".join(parts[:2])


def lag_spark(lags: Sequence[float], width: int = 96, height: int = 18) -> str:
    """The lags of a job's last DR copies (seconds, oldest first) as a small inline SVG line, its range in the
    title. Drawn by hand: a line of two dozen points needs no plotting library and no script."""
    if len(lags) < 2:
        return ""
    from html import escape

    top = max(lags) or 1.0
    step = (width - 4) / (len(lags) - 1)
    points = " ".join(f"{2 + i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(lags))
    ordered = sorted(lags)
    title = (f"lag of the last {len(lags)} copies: newest {age(lags[-1])}, median {age(ordered[len(ordered) // 2])}, "
             f"max {age(top)}")
    return (f'<svg class="lag" width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>"
            f'<polyline fill="none" stroke="#3f51b5" stroke-width="1.5" points="{points}"/></svg>')
