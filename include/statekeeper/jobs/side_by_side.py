"""Independent parts of one job run side by side on its Spark session.

On a small store a job is a chain of small Spark jobs, each a round trip: the Python driver builds a
plan, the JVM plans and schedules a task or two, a Python worker may answer, the result comes back.
One after another they leave the cores idle between them (the report on the sample store: 37 Spark
jobs, about 1.2 of 2 cores busy). Parts that only read frames kept before them and write nothing can
run at once: Spark's scheduler takes jobs from several threads, and py4j gives each Python thread a
JVM thread of its own (which is also why each part activates the session and names its jobs itself).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from statekeeper.jobs.progress import Heartbeat

T = TypeVar("T")
WORKERS = 3   # parts in flight: on 2 cores a third keeps one planning while two have tasks running


def run_side_by_side(spark: Any, beat: Heartbeat, parts: Mapping[str, Callable[[], Any]],
                     workers: int = WORKERS) -> dict[str, Any]:
    """Each part's result by name, once all have finished. A part that fails raises its error here, after
    the others have finished (none is left running on the session the caller goes on using); with several
    failing, the first in `parts`' order."""
    beat.phase(", ".join(parts))
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="statekeeper-part") as pool:
        futures = {name: pool.submit(run_part, spark, beat, name, part) for name, part in parts.items()}
    return {name: future.result() for name, future in futures.items()}


def run_part(spark: Any, beat: Heartbeat, name: str, part: Callable[[], T]) -> T:
    """`part()` in a thread other than the one that started the session: the session made active on the
    JVM side of the thread and its Spark jobs named `name`."""
    from statekeeper.launch.session import activate

    activate(spark)
    beat.name_jobs(name)
    return part()
