"""What the tests' local servers share: a free loopback port, and a server process started with its log in
a file, waited on until healthy, and stopped by PID (only the process the test session started).

Start-up times are kept in STARTUP_TIMES; tests/plugins/object_stores.py prints them once per session.
"""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

STARTUP_TIMES: dict[str, float] = {}


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: all are held open until the last is chosen, so the kernel cannot hand
    out one twice (ports picked one at a time, each released before the next, can repeat)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class LoopbackServer:
    """A server process: `_healthy()` says when it answers; `start_timeout_s` bounds the wait."""

    name = "server"
    start_timeout_s = 60.0

    def __init__(self, argv: list[str], log_path: Path, *, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        started = time.monotonic()
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd,
                                        env=env, start_new_session=True)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        STARTUP_TIMES[self.name] = time.monotonic() - started

    def _healthy(self) -> bool:
        raise NotImplementedError

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}:\n"
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            if self._healthy():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not become healthy in {self.start_timeout_s:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # by PID: only the server we started
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
