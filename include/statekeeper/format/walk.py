"""One traversal of every state handle in a model, shared by references, accounting and rewrites.

`transform(model, visit)` calls `visit(site, role, local_name, node)` for each node that can
reference files or carry inline bytes, and rebuilds only the containers whose children changed
(identity check), so read-only visitors cost no allocations beyond their own.

Nodes passed to `visit`:
* leaf stream handles (ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle,
  EmptySegmentFileHandle) wherever they sit, including coordinator state (slot "coordinator");
* MasterState (slot "master"), InMemoryChangelogHandle (tag 9);
* FileMergingOperatorHandle (tag 17, for its managed directories) before its delegate is visited;
* MergedChannelStateHandle (for its blob) before its delegate is visited.

`role` is the position inside the slot's handle, with the harness oracle's vocabulary:
"delegate" (key-groups/operator/channel delegate, coordinator state), "meta", "shared",
"private" (incremental handles, also inside a changelog handle's materialized part), "delta"
(DSTL file handles of tag 10/13), plus "changes" (tag 9), "state" (master state),
"managed_dirs" (tag 17) and "channel_offsets" (V6 merged blob).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional, Protocol, TypeVar

from .handles import (
    ChangelogEntry,
    ChangelogFileHandle,
    ChangelogHandle,
    FileMergingOperatorHandle,
    IncrementalKeyedHandle,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
    MasterState,
    MergedChannelStateHandle,
    NamedHandle,
    OperatorState,
)


class Model(Protocol):
    """What a traversal reads of a `_metadata` model (statekeeper.format.model.CheckpointMetadata, which
    is built on this module for its `inline_bytes`: the file is typed here by its shape, not imported)."""

    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    total_size: Optional[int]


M = TypeVar("M", bound=Model)

SLOTS = (
    "master", "coordinator", "managed_operator", "raw_operator", "managed_keyed", "raw_keyed",
    "input_channel", "output_channel",
)


class Site:
    """Where a handle sits: operator (None for master state), subtask index (None for
    operator-level state), and the top-level slot name."""

    __slots__ = ("operator", "subtask", "slot")

    def __init__(self, operator: Optional[OperatorState], subtask: Optional[int], slot: str):
        self.operator = operator
        self.subtask = subtask
        self.slot = slot


Visit = Callable[[Site, str, Optional[str], Any], Any]


def transform(model: M, visit: Visit) -> M:
    """Apply `visit` everywhere; returns `model` itself when nothing changed."""
    master_site = Site(None, None, "master")
    masters = tuple(visit(master_site, "state", None, ms) for ms in model.master_states)
    ops = tuple(_operator(op, visit) for op in model.operators)
    if _same(masters, model.master_states) and _same(ops, model.operators):
        return model
    return replace(model, master_states=masters, operators=ops)


def _same(a: tuple, b: tuple) -> bool:
    return all(x is y for x, y in zip(a, b))


def _operator(op: OperatorState, visit: Visit) -> OperatorState:
    coord = op.coordinator
    if coord is not None:
        coord = visit(Site(op, None, "coordinator"), "delegate", None, coord)
    subs = []
    changed = coord is not op.coordinator
    for st in op.subtasks:
        if st.finished:
            subs.append(st)
            continue
        idx = st.index
        mo = st.managed_operator
        if mo is not None:
            mo = _op_handle(Site(op, idx, "managed_operator"), mo, visit)
        ro = st.raw_operator
        if ro is not None:
            ro = _op_handle(Site(op, idx, "raw_operator"), ro, visit)
        mk = st.managed_keyed
        if mk is not None:
            mk = _keyed(Site(op, idx, "managed_keyed"), mk, visit)
        rk = st.raw_keyed
        if rk is not None:
            rk = _keyed(Site(op, idx, "raw_keyed"), rk, visit)
        ic = st.input_channels
        if ic:
            site = Site(op, idx, "input_channel")
            new = tuple(_channel(site, h, visit) for h in ic)
            ic = ic if _same(new, ic) else new
        oc = st.output_channels
        if oc:
            site = Site(op, idx, "output_channel")
            new = tuple(_channel(site, h, visit) for h in oc)
            oc = oc if _same(new, oc) else new
        if (
            mo is st.managed_operator and ro is st.raw_operator and mk is st.managed_keyed
            and rk is st.raw_keyed and ic is st.input_channels and oc is st.output_channels
        ):
            subs.append(st)
        else:
            changed = True
            subs.append(replace(
                st, managed_operator=mo, raw_operator=ro, managed_keyed=mk, raw_keyed=rk,
                input_channels=ic, output_channels=oc,
            ))
    if not changed:
        return op
    return replace(op, coordinator=coord, subtasks=tuple(subs))


def _stream(site: Site, role: str, local_name: Optional[str], h: Any, visit: Visit) -> Any:
    if h is None:
        return None
    if type(h) is KeyGroupsHandle:  # tag 3 nested in a stream position
        d = _stream(site, role, local_name, h.delegate, visit)
        return h if d is h.delegate else replace(h, delegate=d)
    return visit(site, role, local_name, h)


def _op_handle(site: Site, h: Any, visit: Visit) -> Any:
    if isinstance(h, FileMergingOperatorHandle):
        h = visit(site, "managed_dirs", None, h)
    d = _stream(site, "delegate", None, h.delegate, visit)
    return h if d is h.delegate else replace(h, delegate=d)


def _channel(site: Site, h: Any, visit: Visit) -> Any:
    if isinstance(h, MergedChannelStateHandle):
        h = visit(site, "channel_offsets", None, h)
    d = _stream(site, "delegate", None, h.delegate, visit)
    return h if d is h.delegate else replace(h, delegate=d)


def _named(site: Site, role: str, entries: tuple, visit: Visit) -> tuple:
    out = None
    for i, e in enumerate(entries):
        h = e.handle
        n = _stream(site, role, e.local_name, h, visit) if h is not None else None
        if n is not h:
            if out is None:
                out = list(entries)
            out[i] = NamedHandle(e.local_name, n)
    return entries if out is None else tuple(out)


def _keyed(site: Site, h: Any, visit: Visit) -> Any:
    t = type(h)
    if t is IncrementalKeyedHandle:
        meta = _stream(site, "meta", None, h.meta, visit)
        shared = _named(site, "shared", h.shared, visit)
        private = _named(site, "private", h.private, visit)
        if meta is h.meta and shared is h.shared and private is h.private:
            return h
        return replace(h, meta=meta, shared=shared, private=private)
    if t is KeyGroupsHandle:
        d = _stream(site, "delegate", None, h.delegate, visit)
        return h if d is h.delegate else replace(h, delegate=d)
    if t is ChangelogHandle:
        mat = tuple(None if k is None else _keyed(site, k, visit) for k in h.materialized)
        deltas = tuple(_keyed(site, k, visit) for k in h.deltas)
        if _same(mat, h.materialized) and _same(deltas, h.deltas):
            return h
        return replace(h, materialized=mat, deltas=deltas)
    if t is InMemoryChangelogHandle:
        return visit(site, "changes", None, h)
    if t is ChangelogFileHandle:
        entries = h.entries
        new = tuple(
            e if (n := _stream(site, "delta", None, e.handle, visit)) is e.handle
            else ChangelogEntry(e.offset, n)
            for e in entries
        )
        return h if _same(new, entries) else replace(h, entries=new)
    raise TypeError(f"not a keyed state handle: {t.__name__}")
