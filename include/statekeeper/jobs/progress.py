"""Progress for long Spark phases: a log line every few seconds naming the phase, how many tasks
of the running stages are done and any counters the phase updates (Spark accumulators), and the
phase as the Spark job description, so each step is named in the Spark UI.

A run's heartbeat also tags the Spark jobs of the run (`job_tag`), and stops only once none of them is running
any more: a query can return while a job it started still runs. Adaptive execution drops a join whose other side
came back empty and leaves the broadcast job of this side running; the run then released the frames it kept
(statekeeper.jobs.context.Materialized) under that job, which failed on a missing checkpoint block after the
run's summary (a blocked GC run, tests/gc/test_gc_fail_closed.py)."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any


class Heartbeat:
    """Logs a progress line every `interval` seconds until stopped (interval <= 0: silent).

        with Heartbeat(spark, log, "validation run x", 10) as beat:
            beat.phase("stat outside files", lambda: f"{acc.value} files")
            ...
    """

    def __init__(self, spark: Any, log: logging.Logger, prefix: str, interval: float,
                 job_tag: str | None = None) -> None:
        self._context = spark.sparkContext
        self._job_tag = job_tag
        self._tracker = self._context.statusTracker()
        self._log = log
        self._prefix = prefix
        self._interval = interval
        self._phase = "starting"
        self._extra: Callable[[], str] | None = None
        self._since = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statekeeper-heartbeat", daemon=True)

    def phase(self, name: str, extra: Callable[[], str] | None = None) -> None:
        self._phase, self._extra, self._since = name, extra, time.monotonic()
        self.name_jobs(name)

    def name_jobs(self, name: str) -> None:
        """Name (and tag, with the run's `job_tag`) the Spark jobs the calling thread starts: both are properties
        of the thread (`phase` names the main thread's; a part run beside others, statekeeper.jobs.side_by_side,
        its own). A job started for a query in another thread of Spark's (a broadcast) has its query's."""
        try:
            self._context.setJobDescription(f"{self._prefix}: {name}")
            if self._job_tag is not None:
                self._context.addJobTag(self._job_tag)
        except Exception:  # noqa: BLE001 - naming the Spark UI's jobs must never fail the run
            pass

    def wait_for_jobs(self, poll: float = 0.05) -> None:
        """Return once no Spark job tagged with the run's `job_tag` is running (at once without a tag). Spark's
        status store learns of a job through its listener bus, after the job started: once none shows, the bus
        is drained and the store asked again, so that a job started a moment ago is waited for too."""
        if self._job_tag is None:
            return
        context = self._context._jsc.sc()
        while True:
            while self._running(context.statusTracker()):
                time.sleep(poll)
            try:
                context.listenerBus().waitUntilEmpty()
            except Exception:  # noqa: BLE001 - Spark's own API, not a public one: without it, what the store shows
                return
            if not self._running(context.statusTracker()):
                return

    def _running(self, tracker: Any) -> bool:
        infos = (self._tracker.getJobInfo(int(job)) for job in tracker.getJobIdsForTag(self._job_tag))
        return any(info is not None and info.status == "RUNNING" for info in infos)

    @property
    def phase_seconds(self) -> float:
        return time.monotonic() - self._since

    def __enter__(self) -> Heartbeat:
        if self._interval > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.wait_for_jobs()
        try:
            self._context.setJobDescription(None)
            if self._job_tag is not None:
                self._context.removeJobTag(self._job_tag)
        except Exception:  # noqa: BLE001
            pass

    def line(self) -> str:
        tasks = []
        try:
            for stage_id in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage_id)
                if info is not None:
                    tasks.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        except Exception:  # noqa: BLE001 - progress must never fail the job
            pass
        extra = ""
        if self._extra is not None:
            try:
                extra = f", {self._extra()}"
            except Exception:  # noqa: BLE001
                pass
        return (f"{self._prefix}: {self._phase} for {self.phase_seconds:.0f}s{extra}"
                + (f" ({'; '.join(tasks)})" if tasks else ""))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._log.info("%s", self.line())
