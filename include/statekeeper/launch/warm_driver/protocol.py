"""Where a DAG run's driver listens, what identifies the settings it runs with, and the messages.

Standard library only: the Airflow worker imports it without Spark.

Messages are JSON objects, one per line, over a Unix socket in a directory only this user can
enter (the socket runs jobs with the run's storage credentials). A task sends one request; a `run`
is answered with `accepted` (or `refused` and a reason), then any number of `line`s (the job's log
and output), then `exit_code`.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

# A Unix socket path must fit in 108 bytes: the run's key is hashed into the name.
_KEY_DIGEST_CHARS = 32


class Op(str, Enum):
    RUN = "run"      # run one job: entry point and arguments
    PING = "ping"    # is it up, and with which settings
    STOP = "stop"    # finish (after the job in progress, if any) and exit


class Refusal(str, Enum):
    """Why a driver did not take a task's job; the task then submits its own spark-submit."""

    SETTINGS = "settings"   # the task's Spark settings, storage connections or library differ
    BUSY = "busy"           # another task's job is running in it
    STOPPING = "stopping"   # the teardown asked it to stop


class DriverGone(Exception):
    """The driver's connection ended before it reported the job's exit code: the driver process died
    (killed, out of memory) while the job ran. Nothing the job committed is lost; a retry submits its
    own spark-submit."""


def runtime_dir() -> Path:
    """This user's private directory for drivers' sockets and logs: $STATEKEEPER_DRIVER_DIR, else
    <tmp>/statekeeper-drivers-<uid>, created 0700 and refused when it is not private, since anyone who
    can reach a socket can run jobs with its credentials."""
    path = Path(os.environ.get("STATEKEEPER_DRIVER_DIR") or
                Path(tempfile.gettempdir()) / f"statekeeper-drivers-{os.getuid()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} must belong to this user and be private (mode 0700); fix it "
                              f"(chmod 700 {path}) or set STATEKEEPER_DRIVER_DIR to such a directory")
    return path


def run_key(dag_id: str, run_id: str) -> str:
    """The name of one DAG run's driver."""
    return hashlib.sha256(f"{dag_id}\0{run_id}".encode()).hexdigest()[:_KEY_DIGEST_CHARS]


def socket_path(key: str, directory: Path | None = None) -> Path:
    return (directory or runtime_dir()) / f"{key}.sock"


def log_path(key: str, directory: Path | None = None) -> Path:
    """The driver's own log: Spark's and the JVM's output, and what the driver did with each request."""
    return (directory or runtime_dir()) / f"{key}.log"


def library_digest(root: Path) -> str:
    """The library's code as the driver imported it: a task whose checkout changed since (a deploy in
    the middle of a run) must not run the old code."""
    h = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        if "__pycache__" in file.parts:
            continue
        st = file.stat()
        h.update(f"{file.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A digest of everything a spark-submit would start the driver with (master, Spark conf,
    environment including the storage connections' variables, library digest): equal digests, same
    driver. Secrets only enter the digest."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class Request:
    op: Op
    fingerprint: str = ""
    entry_point: str = ""
    argv: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return encode({"op": self.op.value, "fingerprint": self.fingerprint, "entry_point": self.entry_point,
                       "argv": list(self.argv)})

    @classmethod
    def decode(cls, message: Mapping[str, Any]) -> "Request":
        return cls(Op(message["op"]), str(message.get("fingerprint", "")), str(message.get("entry_point", "")),
                   tuple(str(a) for a in message.get("argv", ())))


def encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def messages(conn: socket.socket) -> Iterable[dict[str, Any]]:
    """The messages `conn` sends until it closes."""
    with conn.makefile("rb") as stream:
        for raw in stream:
            if raw.strip():
                yield json.loads(raw)
