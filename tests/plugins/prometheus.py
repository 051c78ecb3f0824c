"""A Prometheus Pushgateway and a Prometheus server for the test session, on loopback (Debian's `prometheus` and
`prometheus-pushgateway`, installed by `make setup`).

* `pushgateway`: `prometheus-pushgateway` on a free port, persisting to a file of its own (Debian's default is the
  system's /var/lib/prometheus);
* `prometheus`: `prometheus` with a data directory of its own, scraping that Pushgateway every second with
  `honor_labels: true` (the pushed job/dag/warehouse labels stay the series' own, as docs/metrics.md tells a
  deployment to configure it) and evaluating monitoring/statekeeper.rules.yml every second.

Both start lazily, once per session (per pytest worker), and are stopped by PID. Neither is the system's
service: the Debian packages' units are never started by the tests, and the ports are the tests' own.
"""
from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.loopback import LoopbackServer, free_port

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "statekeeper.rules.yml"
PUSHGATEWAY_BIN = "prometheus-pushgateway"
PROMETHEUS_BIN = "prometheus"


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: `make setup` installs Debian's prometheus and "
                           "prometheus-pushgateway (or apt-get install them)")
    return found


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


class Pushgateway(LoopbackServer):
    name = "prometheus-pushgateway"

    def __init__(self, base: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: the tests' own file instead.
        super().__init__([_binary(PUSHGATEWAY_BIN), f"--web.listen-address=127.0.0.1:{self.port}",
                          f"--persistence.file={base / 'pushgateway.data'}", "--log.level=warn"],
                         base / "pushgateway.log", cwd=base)

    def _healthy(self) -> bool:
        try:
            return _get(f"{self.url}/-/ready", timeout=1) is not None
        except OSError:
            return False

    def groups(self) -> list[dict[str, Any]]:
        """The pushed groups (its API: labels and metric families of each)."""
        return json.loads(_get(f"{self.url}/api/v1/metrics"))["data"]


class Prometheus(LoopbackServer):
    name = "prometheus"

    def __init__(self, base: Path, pushgateway: Pushgateway) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = base / "prometheus.yml"
        shutil.copy(RULES, base / RULES.name)
        config.write_text(json.dumps({   # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [RULES.name],
            "scrape_configs": [{"job_name": "pushgateway", "honor_labels": True,
                                "static_configs": [{"targets": [f"127.0.0.1:{pushgateway.port}"]}]}],
        }))
        super().__init__([_binary(PROMETHEUS_BIN), f"--config.file={config}", f"--storage.tsdb.path={base / 'data'}",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                         base / "prometheus.log", cwd=base)

    def _healthy(self) -> bool:
        try:
            return _get(f"{self.url}/-/ready", timeout=1) is not None
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        body = json.loads(_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"))
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def scraped_after(self, pushed_at: float, timeout_s: float = 60) -> None:
        """Wait until a scrape of the Pushgateway that began after `pushed_at` (Unix seconds) was ingested and
        the rules were evaluated on it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            targets = self.api("targets")["activeTargets"]
            scraped = [t for t in targets if t["health"] == "up" and _unix(t["lastScrape"]) > pushed_at]
            groups = self.api("rules")["groups"]
            evaluated = groups and all(_unix(g["lastEvaluation"]) > pushed_at + 1 for g in groups)
            if scraped and evaluated:
                return
            time.sleep(0.5)
        raise AssertionError(f"Prometheus did not scrape the Pushgateway after the push; see {self.log_path}")


def _unix(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="session")
def pushgateway(tmp_path_factory) -> Iterator[Pushgateway]:
    server = Pushgateway(tmp_path_factory.mktemp("pushgateway"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def prometheus(pushgateway: Pushgateway, tmp_path_factory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), pushgateway)
    try:
        yield server
    finally:
        server.stop()
