"""A task's side: hand a job to the run's driver, stream its log, return its exit code.

Standard library only. `Declined` from `run` means the driver did not take the job (none listening, other
settings, busy, stopping): nothing ran, and the caller submits its own spark-submit.
"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekeeper.launch.warm_driver.protocol import DriverGone, Op, Request, messages

CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Declined:
    """Why the driver at `socket` did not run the job."""

    socket: Path
    reason: str


class DriverClient:
    """One task's connection to a driver. `close()` (from another thread: the operator's on_kill)
    ends the task's job the way killing its spark-submit would: the driver exits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()

    def _connect(self) -> socket.socket | None:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(CONNECT_TIMEOUT_S)
        try:
            conn.connect(str(self.path))
        except OSError:   # no such socket, or no driver behind it (it exited): nothing to use
            conn.close()
            return None
        conn.settimeout(None)
        with self._lock:
            self._conn = conn
        return conn

    def ping(self) -> dict[str, Any] | None:
        """The driver's answer to a ping (its fingerprint, pid, jobs run), None when none answers."""
        conn = self._connect()
        if conn is None:
            return None
        try:
            conn.sendall(Request(Op.PING).encode())
            return next(iter(messages(conn)), None)
        except OSError:
            return None
        finally:
            self.close()

    def run(self, fingerprint: str, entry_point: str, argv: list[str],
            emit: Callable[[str], None]) -> int | Declined:
        """Run `entry_point` with `argv` in the driver; every line of its log goes to `emit`. Its exit
        code, or Declined when the driver did not take it (then nothing ran)."""
        conn = self._connect()
        if conn is None:
            return Declined(self.path, "no driver is listening")
        try:
            try:
                conn.sendall(Request(Op.RUN, fingerprint, entry_point, tuple(argv)).encode())
            except OSError as exc:
                return Declined(self.path, f"the driver closed the connection ({exc})")
            accepted = False
            for message in messages(conn):
                if "refused" in message:
                    return Declined(self.path, str(message["refused"]))
                if "accepted" in message:
                    accepted = True
                elif "line" in message:
                    emit(str(message["line"]))
                elif "exit_code" in message:
                    return int(message["exit_code"])
            if not accepted:
                return Declined(self.path, "the driver closed the connection before answering")
            raise DriverGone(f"the Spark driver of this DAG run (socket {self.path}) exited while it ran "
                             f"{entry_point}; its log is {self.path.with_suffix('.log')}")
        finally:
            self.close()

    def stop(self, wait_s: float = 60.0) -> bool:
        """Ask the driver to exit; True once it no longer answers (False: still up after `wait_s`)."""
        conn = self._connect()
        if conn is None:
            return True
        try:
            conn.sendall(Request(Op.STOP).encode())
            for _ in messages(conn):
                pass
        except OSError:
            pass
        finally:
            self.close()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.ping() is None:
                return True
            time.sleep(0.2)
        return False

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

