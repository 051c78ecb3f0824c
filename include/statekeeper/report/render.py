"""ReportData -> one self-contained HTML page (Jinja2, inline SVG, inline CSS, no script).

Pure apart from running Graphviz's `dot`: the same data renders the same page, whatever the size of
the store (the data is already cut to top N with totals, statekeeper.report.gather.Limits).
"""
from __future__ import annotations

from datetime import datetime

from statekeeper.units import human_size
from statekeeper.report import charts, lineage
from statekeeper.report.model import ReportData, StorageTotals
from statekeeper.report.template import PAGE


def _environment():
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["size"] = lambda n: human_size(n) if n is not None else ""
    env.filters["num"] = lambda n: f"{n:,}" if n is not None else ""
    env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M UTC") if isinstance(t, datetime) else ""
    env.filters["age"] = charts.age
    return env


_TEMPLATE = None


def _template():
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = _environment().from_string(PAGE)
    return _TEMPLATE


def others(data: ReportData) -> StorageTotals:
    """The directories the storage table leaves out, summed (totals minus the shown rows)."""
    shown = data.storage
    return StorageTotals(
        data.totals.directories - len(shown),
        data.totals.files - sum(r.files for r in shown),
        data.totals.total_bytes - sum(r.total_bytes for r in shown),
        data.totals.pinned_bytes - sum(r.pinned_bytes for r in shown),
        data.totals.reclaimable_bytes - sum(r.reclaimable_bytes for r in shown),
        data.totals.inline_bytes - sum(r.inline_bytes for r in shown),
        data.totals.snapshots - sum(r.snapshots for r in shown),
    )


def render(data: ReportData) -> str:
    svg, error = "", ""
    if data.lineage_edges:
        try:
            svg = lineage.render(data.lineage_nodes, data.lineage_edges).svg
        except lineage.LayoutUnavailable as exc:
            error = f"The lineage graph needs a layout: {exc}. The edges are listed below."
    rendered = {
        "storage": charts.storage_bars(data.storage),
        "trend": charts.trend_lines(data.trend),
        "metadata": charts.metadata_lines(data.metadata_series),
    }
    return _template().render(d=data, charts=rendered, lineage_svg=svg, lineage_error=error, others=others(data),
                              src=lambda table, where: data.source(table, where).text(),
                              restorable=lineage.restorable_text, lag_spark=charts.lag_spark)
