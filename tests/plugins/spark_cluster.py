"""A Spark standalone cluster on loopback: one master and two workers, from pyspark's own spark-class.

Each daemon is its own JVM (separate processes, as on a real cluster), bound to 127.0.0.1 on free
ports, started in its own session and stopped by PID (SIGTERM, then SIGKILL after a timeout) when
the fixture ends, whatever the test did. Every worker has one core, a memory cap, its own
--work-dir and its own current directory in a private temporary directory: nothing is shared with
the driver's working directory.

What the workers' processes inherit is spelled out, not copied from the test process: no
PYTHONPATH naming the checkout, no storage variables, a HOME of their own. Instead PYTHONPATH holds
only `cluster_site/` (its sitecustomize.py), which makes `statekeeper` importable in the executors'
Python workers from nothing but what Spark ships (`--py-files`), and records where each worker
imported it from, so a test can check the code came from the shipped zip.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
import pytest

from tests.plugins.loopback import free_ports

SPARK_HOME = Path(pyspark.__file__).resolve().parent
CLUSTER_SITE = Path(__file__).resolve().parent / "cluster_site"
WORKERS = 2
WORKER_MEMORY = "1g"
# The executors' heap must fit in a worker's memory; Spark's default (1g) would leave nothing over.
EXECUTOR_MEMORY = "512m"
_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 20.0
# A port taken between choosing it and the daemon binding it (another test's server got it first) fails that
# start; the cluster is then started again on fresh ports.
_START_ATTEMPTS = 3


class ClusterStartError(RuntimeError):
    """The standalone master or a worker did not come up in time."""


class PortTakenError(ClusterStartError):
    """A daemon could not bind its port, or something else answers on the master's UI port."""


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen
    log: Path
    work_dir: Path | None = None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class StandaloneCluster:
    base: Path
    master_port: int = 0
    webui_port: int = 0
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def import_log_dir(self) -> Path:
        """Where cluster_site/sitecustomize.py records each executor Python worker's imports."""
        return self.base / "imports"

    @property
    def workers(self) -> list[Daemon]:
        return [d for d in self.daemons if d.work_dir is not None]

    def state(self) -> dict:
        """The master's JSON status page: workers, active and completed applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as resp:
            body = resp.read()
        try:
            return json.loads(body)
        except ValueError:
            raise PortTakenError(f"port {self.webui_port} answers, but not with the master's JSON status: another "
                                 f"server holds it ({body[:80]!r})") from None

    def _env(self, home: Path) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "SPARK_HOME": str(SPARK_HOME),
            # An empty conf dir: no spark-env.sh or spark-defaults.conf of the machine's.
            "SPARK_CONF_DIR": str(self.base / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.base / "logs"),
            "PYSPARK_PYTHON": sys.executable,
            # The one PYTHONPATH entry the executors inherit: the import guard, never the checkout.
            "PYTHONPATH": str(CLUSTER_SITE),
            "STATEKEEPER_CLUSTER_IMPORT_LOG": str(self.import_log_dir),
            "PYTHONDONTWRITEBYTECODE": "1",
            # The master and workers only schedule: C1 and a small serial heap, as the harness's JVMs. The
            # executors keep the options the applications give them (the test's spark-defaults.conf).
            # No spark.port.maxRetries: a daemon whose port was taken fails instead of moving to the next port,
            # where the test would not look for it.
            "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dspark.port.maxRetries=0",
            "SPARK_DAEMON_MEMORY": "256m",
        }
        if os.environ.get("JAVA_HOME"):
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        return env

    def _spawn(self, name: str, args: list[str], work_dir: Path | None = None) -> Daemon:
        home = self.base / name
        home.mkdir(parents=True, exist_ok=True)
        log = self.base / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=home, env=self._env(home), start_new_session=True,
            )
        daemon = Daemon(name, process, log, work_dir)
        self.daemons.append(daemon)
        return daemon

    def start(self) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once()
                return
            except PortTakenError:
                self.stop()
                if attempt == _START_ATTEMPTS:
                    raise
                self.daemons.clear()

    def _start_once(self) -> None:
        for d in ("conf", "logs", "imports"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        self.master_port, self.webui_port, *worker_ports = free_ports(2 + 2 * WORKERS)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.master_port), "--webui-port", str(self.webui_port)])
        for i in range(WORKERS):
            work = self.base / f"worker-{i}" / "work"
            work.mkdir(parents=True, exist_ok=True)
            port, webui_port = worker_ports[2 * i:2 * i + 2]
            self._spawn(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                        "--port", str(port), "--webui-port", str(webui_port),
                                        "--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(work),
                                        self.master_url], work_dir=work)
        self._wait_for_workers()

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        alive = 0
        while time.monotonic() < deadline:
            for d in self.daemons:
                if d.process.poll() is not None:
                    error = PortTakenError if "BindException" in d.tail(200) else ClusterStartError
                    raise error(f"{d.name} exited with {d.process.returncode}:\n{d.tail()}")
            try:
                alive = sum(w.get("state") == "ALIVE" for w in self.state().get("workers", []))
            except OSError:
                alive = 0   # the master's UI is not up yet
            if alive == WORKERS:
                return
            time.sleep(0.5)
        logs = "\n".join(f"--- {d.name}\n{d.tail(15)}" for d in self.daemons)
        raise ClusterStartError(f"{alive} of {WORKERS} workers registered with {self.master_url} "
                                f"within {_START_TIMEOUT_S:.0f}s\n{logs}")

    def stop(self) -> None:
        """Workers first (each takes its executors down), then the master; by PID, and whatever is
        left in each daemon's own session (the executors and their Python workers) after that."""
        for d in reversed(self.daemons):
            if d.process.poll() is None:
                d.process.terminate()
        for d in reversed(self.daemons):
            try:
                d.process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                d.process.kill()
                d.process.wait(timeout=_STOP_TIMEOUT_S)
            try:    # the session we created for it: its id is the daemon's PID
                os.killpg(d.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
