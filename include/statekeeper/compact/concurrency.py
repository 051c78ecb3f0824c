"""Bounded concurrency for the many small objects one compaction writes and reads back."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


def bounded_map(fn: Callable[[Any], Any], items: Iterable[Any], in_flight: int) -> Iterator[Any]:
    """`fn` over `items` in order, at most `in_flight` at once and never more pending than that
    (ThreadPoolExecutor.map submits everything first: 10^5 futures are hundreds of MB)."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    if in_flight <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(in_flight, thread_name_prefix="compact") as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= in_flight * 2:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
