"""Run a DAG with `dag.test()` for a person at a terminal: one line per task, the logs in a file.

`dag.test()` prints every log line of Airflow and of each task (the task runner's JSON, the whole
spark-submit output): a demo run printed 1,385 lines, 1,316 of them such, between the few a person
came for. Here the process's standard output and error go to a log file for the run, and the
terminal gets one line per task as it ends (task, state, seconds) and the file's name. A task
that fails gets the tail of what it printed, cut from the log file at the offsets where it started
and ended (`dag.test()` runs one task at a time, in this process).

Task ends come from Airflow's task-instance listener hooks, which the task runner calls in this
process; tasks that never run (skipped by a rule, upstream failed) are read from the run afterwards.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TAIL_LINES = 40


@dataclass(frozen=True)
class TaskLine:
    task_id: str
    state: str
    seconds: float | None          # None: the task never ran

    def render(self) -> str:
        took = f"{self.seconds:6.1f}s" if self.seconds is not None else "      -"
        return f"  {self.task_id:<20} {self.state:<16} {took}"


@dataclass(frozen=True)
class DagOutcome:
    dag_id: str
    run_id: str
    state: str
    tasks: tuple[TaskLine, ...]
    log: Path
    failed_tails: dict[str, str] = field(default_factory=dict)
    run: Any = None                # the DagRun, for callers that read more of it

    @property
    def succeeded(self) -> bool:
        return self.state == "success"


class _Listener:
    """Airflow task-instance listener: records where each task's output starts and ends in the log
    and prints a line when it ends."""

    def __init__(self, log: Path, emit: Callable[[str], None]) -> None:
        self._log = log
        self._emit = emit
        self.started: dict[str, tuple[float, int]] = {}
        self.ended: dict[str, tuple[str, float, int, int]] = {}   # task -> state, seconds, from, to

    def _offset(self) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        return self._log.stat().st_size

    def _end(self, task_instance: Any, state: str) -> None:
        task_id = task_instance.task_id
        now, end = time.monotonic(), self._offset()
        began, offset = self.started.get(task_id, (now, end))    # no start seen: nothing to cut
        self.ended[task_id] = (state, now - began, offset, end)
        self._emit(TaskLine(task_id, state, now - began).render())

    # The hook names and arguments are Airflow's listener spec (airflow.sdk listener hookspecs).
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        self.started[task_instance.task_id] = (time.monotonic(), self._offset())

    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._end(task_instance, "success")

    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._end(task_instance, "failed")

    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        self._end(task_instance, "skipped")


def _hooked(listener: _Listener) -> Any:
    """The listener as an object pluggy accepts: functions marked as Airflow hook implementations
    (pluggy marks functions, not bound methods)."""
    from airflow.listeners import hookimpl

    class Hooked:
        @staticmethod
        @hookimpl
        def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
            listener.on_task_instance_running(previous_state, task_instance)

        @staticmethod
        @hookimpl
        def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
            listener.on_task_instance_success(previous_state, task_instance)

        @staticmethod
        @hookimpl
        def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
            listener.on_task_instance_failed(previous_state, task_instance, error)

        @staticmethod
        @hookimpl
        def on_task_instance_skipped(previous_state: Any, task_instance: Any) -> None:
            listener.on_task_instance_skipped(previous_state, task_instance)

    return Hooked()


def _tail(log: Path, start: int, end: int, lines: int = TAIL_LINES) -> str:
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read(max(0, end - start)).decode("utf-8", errors="replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


@contextmanager
def console_to_file(log: Path) -> Iterator[Callable[[str], None]]:
    """Inside the block this process's standard output and error (file descriptors 1 and 2, so child
    processes' output too) are appended to `log`; the function it yields writes a line to where
    standard output went before."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved_out), "w", buffering=1)

    def emit(line: str) -> None:
        terminal.write(line + "\n")
        terminal.flush()

    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    # Python-level writers too: under a harness that captures output (pytest), sys.stdout is not fd 1.
    streams = sys.stdout, sys.stderr
    text = os.fdopen(os.dup(log_fd), "w", buffering=1, encoding="utf-8", errors="replace")
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        sys.stdout = sys.stderr = text
        yield emit
    finally:
        text.flush()
        sys.stdout, sys.stderr = streams
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, log_fd):
            os.close(fd)
        text.close()
        terminal.close()


def run_dag_quietly(dag: Any, run_conf: dict[str, Any], log: Path, emit: Callable[[str], None]) -> DagOutcome:
    """`dag.test(run_conf=...)` inside `console_to_file(log)`: `emit` gets a line per task as it ends,
    then one per task that never ran, then the tail of each failed task's output."""
    from airflow.sdk.listener import get_listener_manager

    listener = _Listener(log, emit)
    hooked = _hooked(listener)
    manager = get_listener_manager()
    manager.add_listener(hooked)
    try:
        run = dag.test(run_conf=run_conf)
    finally:
        manager.pm.unregister(hooked)
    sys.stdout.flush()
    sys.stderr.flush()
    tasks, tails = [], {}
    for ti in sorted(run.get_task_instances(), key=lambda t: (t.start_date is None, t.start_date or 0, t.task_id)):
        state = _plain(ti.state)
        if ti.task_id in listener.ended:
            _, seconds, start, end = listener.ended[ti.task_id]
        else:       # never ran: skipped by a rule, upstream failed
            seconds, start, end = None, 0, 0
            emit(TaskLine(ti.task_id, state, None).render())
        tasks.append(TaskLine(ti.task_id, state, seconds))
        if state == "failed" and end > start:
            tails[ti.task_id] = _tail(log, start, end)
    for task_id, text in tails.items():
        emit(f"  --- {task_id} failed; the end of its output (all of it: {log}) ---")
        emit("\n".join(f"  | {line}" for line in text.splitlines()))
    return DagOutcome(dag.dag_id, run.run_id, _plain(run.state), tuple(tasks), log, tails, run)


def _plain(state: Any) -> str:
    return str(getattr(state, "value", state))
