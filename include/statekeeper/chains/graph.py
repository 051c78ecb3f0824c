"""Transitive lineage over direct dependencies. Pure reference implementation.

The Spark job computes the same thing with joins (statekeeper.chains.spark_graph); tests check
the two agree. Definitions (docs/chains-and-validation.md):

* A *direct* dependency is (snapshot s, target T): s references files of T. Only cross-directory
  ones (relation other_job / savepoint / external) are followed for lineage.
* Every snapshot is a *member* of its own directory and of its job location
  (`locate.lineage_nodes`). The target graph has an edge X -> T when some member snapshot of X
  has a direct cross-directory dependency on T.
* s depends *transitively* on T at depth d+1 when s depends directly on T1 and T is reachable
  from T1 in d >= 1 steps, unless s depends on T directly, or T is s's own directory or job.
  `via` lists the intermediate targets, T1 first; among equally short paths the lexicographically
  smallest `via` wins (so results are deterministic).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DirectEdge:
    snapshot_uri: str
    nodes: tuple[str, ...]      # the target URIs the snapshot is a member of (own dir, own job)
    target_uri: str
    foreign: bool               # relation other_job / savepoint / external


@dataclass(frozen=True, slots=True)
class Lineage:
    snapshot_uri: str
    target_uri: str
    depth: int
    via: tuple[str, ...]


def node_edges(edges: Iterable[DirectEdge]) -> dict[str, set[str]]:
    """Target graph: member node -> targets its member snapshots depend on (cross-directory)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not e.foreign:
            continue
        for node in e.nodes:
            if node != e.target_uri:
                graph.setdefault(node, set()).add(e.target_uri)
    return graph


def node_closure(graph: dict[str, set[str]], max_depth: int = 1000) -> dict[tuple[str, str], tuple[int, tuple[str, ...]]]:
    """(X, T) -> (depth, via) for every T reachable from X, level by level as the Spark job does."""
    best: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
    frontier: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
    for x, targets in graph.items():
        for t in targets:
            frontier[(x, t)] = (1, ())
    depth = 1
    while frontier:
        if depth > max_depth:
            raise RecursionError(f"lineage deeper than {max_depth}")
        best.update(frontier)
        nxt: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
        for (x, y), (d, via) in frontier.items():
            for t in graph.get(y, ()):
                if t == x or (x, t) in best:
                    continue
                cand = (d + 1, via + (y,))
                cur = nxt.get((x, t))
                if cur is None or cand < cur:
                    nxt[(x, t)] = cand
        frontier = nxt
        depth += 1
    return best


def lineage(edges: Iterable[DirectEdge]) -> list[Lineage]:
    """Transitive (depth >= 2) dependencies of every snapshot, sorted."""
    edges = list(edges)
    closure = node_closure(node_edges(edges))
    by_x: dict[str, list[tuple[str, int, tuple[str, ...]]]] = {}
    for (x, t), (d, via) in closure.items():
        by_x.setdefault(x, []).append((t, d, via))
    direct: dict[str, set[str]] = {}
    nodes: dict[str, tuple[str, ...]] = {}
    firsts: dict[str, set[str]] = {}
    for e in edges:
        direct.setdefault(e.snapshot_uri, set()).add(e.target_uri)
        nodes[e.snapshot_uri] = e.nodes
        if e.foreign:
            firsts.setdefault(e.snapshot_uri, set()).add(e.target_uri)
    out: list[Lineage] = []
    for s, t1s in firsts.items():
        found: dict[str, tuple[int, tuple[str, ...]]] = {}
        for t1 in t1s:
            for t, d, via in by_x.get(t1, ()):
                if t in direct[s] or t in nodes[s]:
                    continue
                cand = (d + 1, (t1,) + via)
                cur = found.get(t)
                if cur is None or cand < cur:
                    found[t] = cand
        out.extend(Lineage(s, t, d, via) for t, (d, via) in found.items())
    out.sort(key=lambda r: (r.snapshot_uri, r.target_uri))
    return out
