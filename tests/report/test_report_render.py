"""Rendering without Spark: a 1,000-job store's page stays readable (top N with totals, not a
1,000-node graph), hostile directory names stay text, and a missing `dot` degrades to a table."""
from __future__ import annotations

import re

from statekeeper.report import lineage
from statekeeper.report.gather import Limits
from statekeeper.report.model import LineageEdge, LineageNode
from statekeeper.report.render import others, render
from tests.report.synthetic import synthetic_report


def test_large_store_renders_top_n_with_totals():
    limits = Limits()
    data = synthetic_report(jobs=1000, snapshots_per_job=50, limits=limits)
    page = render(data)
    nodes = re.findall(r'<g id="sknode\d+" class="node"', page)
    assert 0 < len(nodes) <= 2 * limits.edges and len(nodes) == len(data.lineage_nodes)
    assert len(re.findall(r"<tr data-job-dir=", page)) == len(data.storage) + len(data.health)
    rest = others(data)
    assert rest.directories == 1000 - limits.storage
    assert rest.total_bytes + sum(r.total_bytes for r in data.storage) == data.totals.total_bytes
    assert f"{rest.directories:,} other directories" in page
    assert f"{len(data.lineage_edges)} heaviest of {data.lineage_edge_count:,}" in page
    # unrestorable jobs come first and are marked, whatever their size
    assert page.count('class="unrestorable"') == data.jobs_unrestorable == 30
    assert len(page) < 3_000_000


def test_names_from_a_listing_stay_text():
    hostile = '"><script>alert(1)</script>'
    nodes = (LineageNode("file:///r", hostile, None, "directory", None, 10), LineageNode("file:///r", "a", "a", "job", True, 5))
    edges = (LineageEdge("file:///r", hostile, "file:///r", "a", 1, 10),)
    svg = lineage.render(nodes, edges).svg
    assert "<script>" not in svg and "script" in svg
    data = synthetic_report(jobs=20, snapshots_per_job=3)
    page = render(data.__class__(**{**data.__dict__, "lineage_nodes": nodes, "lineage_edges": edges,
                                    "notes": (hostile,)}))
    assert "<script>" not in page


def test_without_dot_the_edges_are_still_listed(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    data = synthetic_report(jobs=30, snapshots_per_job=3)
    page = render(data)
    assert "The lineage graph needs a layout" in page and "apt-get install graphviz" in page
    assert page.count("<tr><td><code>") >= len(data.lineage_edges)


def test_ownerless_directories_of_the_newest_gc_run_are_listed():
    from dataclasses import replace

    from statekeeper.jobs.gc_runs import OwnerlessDir
    from statekeeper.tables.vocabulary import OwnerlessVerdict

    data = synthetic_report(jobs=20, snapshots_per_job=3)
    held = OwnerlessDir("file:///r", "a" * 32, 24, 3 * 2**20, OwnerlessVerdict.HELD_BACK)
    page = render(replace(data, gc=replace(data.gc, ownerless=(held,))))
    row = re.search(r'<tr data-ownerless-dir="a{32}" data-verdict="held_back">.*?</tr>', page, re.S)
    assert row and 'data-count="24"' in row.group(0) and f'data-bytes="{3 * 2**20}"' in row.group(0)
    assert "Ownerless job directories" in page and "held back" in row.group(0)
    assert "Ownerless job directories" not in render(data)


def test_claimable_tails_of_the_newest_gc_run_are_listed():
    from dataclasses import replace

    from statekeeper.jobs.gc_runs import ClaimableTail
    from statekeeper.tables.vocabulary import OwnerlessVerdict

    data = synthetic_report(jobs=20, snapshots_per_job=3)
    held = ClaimableTail("file:///r", "b" * 32, 12, 5 * 2**20, OwnerlessVerdict.HELD_BACK)
    page = render(replace(data, gc=replace(data.gc, claimable=(held,))))
    row = re.search(r'<tr data-claimable-dir="b{32}" data-verdict="held_back">.*?</tr>', page, re.S)
    assert row and 'data-count="12"' in row.group(0) and f'data-bytes="{5 * 2**20}"' in row.group(0)
    assert "Claimable tails" in page and "held back" in row.group(0)
    assert "Claimable tails" not in render(data)


def test_rpo_ages_and_lag_lines_read_as_people_read_them():
    from statekeeper.report.charts import age, lag_spark

    assert [age(s) for s in (None, 0, 42.4, 252, 3600, 11100, 2 * 86400 + 3700)] == \
        ["", "0s", "42s", "4m 12s", "1h", "3h 5m", "2d 1h"]
    assert lag_spark([]) == "" and lag_spark([30.0]) == ""        # one copy is no trend
    line = lag_spark([60.0, 120.0, 90.0])
    points = line.split('points="')[1].split('"')[0].split()
    assert line.startswith('<svg class="lag"') and len(points) == 3
    assert "newest 1m 30s, median 1m 30s, max 2m" in line
    # the highest lag touches the top of the box, the lowest stays above the bottom: the line's scale is its max
    ys = [float(p.split(",")[1]) for p in points]
    assert ys.index(min(ys)) == 1 and min(ys) == 2.0 and max(ys) < 18
