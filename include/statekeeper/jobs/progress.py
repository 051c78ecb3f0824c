"""Progress for long Spark phases: a log line every few seconds naming the phase, how many tasks
of the running stages are done and any counters the phase updates (Spark accumulators), and the
phase as the Spark job description, so each step is named in the Spark UI."""
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

    def __init__(self, spark: Any, log: logging.Logger, prefix: str, interval: float) -> None:
        self._context = spark.sparkContext
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
        """Name the Spark jobs the calling thread starts: the job description is a property of the thread
        (`phase` names the main thread's; a part run beside others, statekeeper.jobs.side_by_side, its own)."""
        try:
            self._context.setJobDescription(f"{self._prefix}: {name}")
        except Exception:  # noqa: BLE001 - naming the Spark UI's jobs must never fail the run
            pass

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
        try:
            self._context.setJobDescription(None)
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
