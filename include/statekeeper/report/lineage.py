"""The lineage graph as inline SVG, laid out by Graphviz's `dot`.

`dot` is the layered (Sugiyama) layout: restore chains read left to right, oldest job on the left
(A ← B ← C), edges labelled with the files and bytes the newer job still uses of the older one.
It runs as the `dot` executable (Debian package graphviz, installed by `make setup`) through the
`graphviz` package, which quotes every label, so directory names from a listing cannot break out.
Graphviz has no data attributes: each node gets a unique id, and the SVG's `<g id=... class="node">`
is then given `data-job-dir` / `data-restorable` (what the page's tests and styles select on).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Sequence

from statekeeper.units import human_size
from statekeeper.report.model import LineageEdge, LineageNode

FILL = {True: "#d9f2d9", False: "#f8d0d0", None: "#eeeeee"}
BORDER = {True: "#2e7d32", False: "#c62828", None: "#9e9e9e"}
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)


class LayoutUnavailable(RuntimeError):
    """Graphviz's `dot` is not installed: the page shows the edges as a table instead."""


@dataclass(frozen=True)
class Layout:
    svg: str


def restorable_text(flag: bool | None) -> str:
    return "unknown" if flag is None else ("true" if flag else "false")


def render(nodes: Sequence[LineageNode], edges: Sequence[LineageEdge]) -> Layout:
    try:
        import graphviz
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise LayoutUnavailable("the graphviz package is not installed") from exc
    ids = {n.key: f"sknode{i}" for i, n in enumerate(nodes)}  # no "-": Graphviz writes it as &#45;
    g = graphviz.Digraph("lineage", engine="dot")
    g.attr(rankdir="RL", bgcolor="transparent", nodesep="0.3", ranksep="0.9", fontname="Helvetica")
    g.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="10", penwidth="1.5")
    g.attr("edge", fontname="Helvetica", fontsize="9", color="#555555", arrowsize="0.7")
    for n in nodes:
        label = f"{n.job_dir[:12]}{'…' if len(n.job_dir) > 12 else ''}\n{n.kind} · {human_size(n.total_bytes)}"
        g.node(ids[n.key], label=label, id=ids[n.key], tooltip=f"{n.root}/{n.job_dir}",
               fillcolor=FILL[n.restorable], color=BORDER[n.restorable])
    for e in edges:
        g.edge(ids[f"{e.root}/{e.job_dir}"], ids[f"{e.target_root}/{e.target_job_dir}"],
               label=f"{e.files} files\n{human_size(e.bytes)}",
               tooltip=f"{e.root}/{e.job_dir} uses {e.files} files ({e.bytes} bytes) of {e.target_root}/{e.target_job_dir}")
    try:
        svg = g.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as exc:
        raise LayoutUnavailable("Graphviz's `dot` is not on PATH (Debian: apt-get install graphviz; `make setup` "
                                "installs it)") from exc
    svg = _PROLOGUE.sub("", svg, count=1)
    for n in nodes:
        attrs = (f' data-job-dir="{html.escape(n.job_dir, quote=True)}" data-root="{html.escape(n.root, quote=True)}"'
                 f' data-restorable="{restorable_text(n.restorable)}"')
        svg = svg.replace(f'<g id="{ids[n.key]}" class="node"', f'<g id="{ids[n.key]}" class="node"{attrs}', 1)
    return Layout(svg.replace("<svg ", '<svg role="img" aria-label="lineage of jobs and savepoints" ', 1))
