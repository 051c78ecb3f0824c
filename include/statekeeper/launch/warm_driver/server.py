"""The driver's side: one Spark session, jobs run one at a time as tasks send them.

Started under spark-submit by a DAG run's setup task (`spark_jobs/spark_driver.py`), so its JVM, conf
and environment are exactly a task's. Each job runs through `statekeeper.launch.entrypoint.run`, the code a
job's own spark-submit runs, in the main thread; its stdout, stderr and log records go to the task
that sent it (and to this driver's log). Between jobs the session's cached data is dropped.
"""
from __future__ import annotations

import argparse
import importlib
import io
import logging
import os
import queue
import socket
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekeeper import registry
from statekeeper.registry import ExitCode
from statekeeper.launch.warm_driver.protocol import Op, Refusal, Request, encode, messages

log = logging.getLogger("statekeeper.launch.warm_driver")

DEFAULT_IDLE_TIMEOUT_S = 600.0
# The exit status when the task whose job is running goes away: what a killed spark-submit's would be.
EXIT_TASK_GONE = 143
_FIRST_MESSAGE_TIMEOUT_S = 10.0


class _Sink:
    """Where the running job's output goes: its task's connection, one JSON line per log line."""

    def __init__(self) -> None:
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()

    def attach(self, conn: socket.socket | None) -> None:
        with self._lock:
            self._conn = conn

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            if self._conn is None:
                return
            try:
                self._conn.sendall(encode(message))
            except OSError:   # the task went away; the watcher ends the driver
                self._conn = None

    def line(self, text: str) -> None:
        self.send({"line": text})


class _LineWriter(io.TextIOBase):
    """sys.stdout / sys.stderr while a job runs: whole lines to the task, everything to the driver's log."""

    def __init__(self, sink: _Sink, log_stream: Any) -> None:
        self._sink, self._log, self._partial = sink, log_stream, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._log.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._sink.line(line)
        return len(text)

    def flush(self) -> None:
        self._log.flush()
        if self._partial:
            self._sink.line(self._partial)
            self._partial = ""


class _SinkHandler(logging.Handler):
    def __init__(self, sink: _Sink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._sink.line(self.format(record))
        except Exception:  # noqa: BLE001 - logging must never fail the job
            self.handleError(record)


@dataclass
class _State:
    fingerprint: str
    jobs: int = 0
    busy: bool = False
    stopping: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Driver:
    """Serves jobs on `path` until stopped, or idle for `idle_timeout_s`."""

    def __init__(self, spark: Any, path: Path, fingerprint: str, idle_timeout_s: float) -> None:
        self.spark, self.path, self.idle_timeout_s = spark, path, idle_timeout_s
        self.state = _State(fingerprint)
        self.sink = _Sink()
        self._work: queue.Queue[tuple[socket.socket, Request] | None] = queue.Queue()
        self._listener = self._listen()

    def _listen(self) -> socket.socket:
        self.path.unlink(missing_ok=True)   # the setup starts a driver only where none answers
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)   # the socket is 0600 from its first moment
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        listener.listen(16)
        return listener

    def serve(self) -> None:
        threading.Thread(target=self._accept, name="warm-driver-accept", daemon=True).start()
        log.info("serving on %s (idle timeout %.0f s, pid %d)", self.path, self.idle_timeout_s, os.getpid())
        try:
            while True:
                try:
                    item = self._work.get(timeout=self.idle_timeout_s)
                except queue.Empty:
                    with self.state.lock:   # a job accepted just now is queued under this lock: run it first
                        if not self._work.empty():
                            continue
                        self.state.stopping = True
                    log.info("no job for %.0f s: exiting (the DAG run's teardown did not stop this driver)",
                             self.idle_timeout_s)
                    return
                if item is None:
                    log.info("stopped by the DAG run's teardown after %d job(s)", self.state.jobs)
                    return
                self._run(*item)
        finally:
            self._listener.close()
            self.path.unlink(missing_ok=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:   # closed by serve()
                return
            try:
                self._answer(conn)
            except Exception as exc:  # noqa: BLE001 - a bad request must not end the driver
                log.warning("refused a malformed request: %s: %s", type(exc).__name__, exc)
                conn.close()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(_FIRST_MESSAGE_TIMEOUT_S)
        request = Request.decode(next(iter(messages(conn))))
        conn.settimeout(None)
        if request.op is Op.PING:
            conn.sendall(encode({"pid": os.getpid(), "fingerprint": self.state.fingerprint, "jobs": self.state.jobs,
                                 "busy": self.state.busy}))
            conn.close()
            return
        if request.op is Op.STOP:
            with self.state.lock:
                self.state.stopping = True
            self._work.put(None)
            conn.sendall(encode({"stopping": True}))
            conn.close()
            return
        with self.state.lock:
            refusal = (Refusal.STOPPING if self.state.stopping
                       else Refusal.SETTINGS if request.fingerprint != self.state.fingerprint
                       else Refusal.BUSY if self.state.busy else None)
            if refusal is None:
                self.state.busy = True
                self._work.put((conn, request))
                return
        log.info("refused %s: %s", request.entry_point, refusal.value)
        conn.sendall(encode({"refused": refusal.value}))
        conn.close()

    def _run(self, conn: socket.socket, request: Request) -> None:
        finished = threading.Event()
        threading.Thread(target=self._watch, args=(conn, request.entry_point, finished), name="warm-driver-watch",
                         daemon=True).start()
        self.sink.attach(conn)
        self.sink.send({"accepted": True})
        started = time.monotonic()
        log.info("running %s %s", request.entry_point, " ".join(request.argv))
        try:
            code = self._execute(request)
        finally:
            # Free before the task hears the exit code: its DAG's next task may ask at once.
            with self.state.lock:
                self.state.busy = False
                self.state.jobs += 1
        finished.set()
        self.sink.send({"exit_code": int(code)})
        self.sink.attach(None)
        conn.close()
        log.info("%s exited %d after %.1f s", request.entry_point, code, time.monotonic() - started)

    def _execute(self, request: Request) -> int:
        from statekeeper.launch.entrypoint import run

        handler = _SinkHandler(self.sink)
        root = logging.getLogger()
        if root.handlers:
            handler.setFormatter(root.handlers[0].formatter)
        out, err = _LineWriter(self.sink, sys.__stdout__), _LineWriter(self.sink, sys.__stderr__)
        root.addHandler(handler)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    entry = importlib.import_module(registry.job(request.entry_point).entry_module).ENTRY
                    return int(run(entry, list(request.argv), prog=request.entry_point))
                except SystemExit as exc:   # argparse's usage errors and --help
                    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.USAGE)
                except KeyError as exc:
                    print(f"{exc.args[0]}: not a Statekeeper job", file=sys.stderr)
                    return ExitCode.USAGE
                except Exception:  # noqa: BLE001 - run() reports its own; this is the driver failing around it
                    logging.getLogger("statekeeper.launch.warm_driver").exception("%s failed in the driver",
                                                                           request.entry_point)
                    return ExitCode.INTERNAL
                finally:
                    out.flush()
                    err.flush()
        finally:
            root.removeHandler(handler)
            # What one job cached must not hold the next one's memory.
            self.spark.catalog.clearCache()

    def _watch(self, conn: socket.socket, entry_point: str, finished: threading.Event) -> None:
        """End the driver when the task goes away before its job finished: its job must stop as a killed
        spark-submit's would, not go on deleting or copying with nobody to report to."""
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        if not finished.is_set():
            log.error("the task running %s went away before the job finished: exiting, as its own spark-submit "
                      "would have been killed", entry_point)
            logging.shutdown()
            os._exit(EXIT_TASK_GONE)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="spark_driver",
        description="Serve Statekeeper jobs from one Spark driver for a DAG run (started by the run's setup task; "
                    "statekeeper.launch.warm_driver).")
    p.add_argument("--socket", required=True, help="the Unix socket to listen on (in a private directory)")
    p.add_argument("--fingerprint", required=True, help="the settings digest a task's must equal")
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S,
                   help="exit after this many seconds without a job (default %(default)s)")
    p.add_argument("--jobs-file", type=Path, default=None,
                   help="when stopped or idle, write how many jobs ran here (what decides whether the class archive "
                        "its JVM writes at exit is published; statekeeper.launch.jvm_startup)")
    return p


def main(argv: list[str] | None = None) -> int:
    from statekeeper.launch.pyspark_path import prefer_installed_pyspark

    prefer_installed_pyspark()   # before anything imports PySpark
    from statekeeper.launch.entrypoint import configure_logging, spark_session

    args = parser().parse_args(argv)
    configure_logging()
    path = Path(args.socket)
    with spark_session("statekeeper-driver") as spark:
        driver = Driver(spark, path, args.fingerprint, args.idle_timeout)
        driver.serve()
    if args.jobs_file is not None:
        args.jobs_file.write_text(f"{driver.state.jobs}\n")
    return 0
