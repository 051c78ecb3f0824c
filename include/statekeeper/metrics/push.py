"""The edge to Prometheus: a run's samples pushed to a Pushgateway, the Prometheus way for batch jobs.

One group per (job label, DAG, warehouse): a push replaces the whole group (HTTP PUT, prometheus-client's
`push_to_gateway`), so each run's figures replace the previous run's of the same DAG and warehouse, and a
metric that no longer has a value (a job directory gone) disappears with it. Credentials travel as HTTP basic
auth, never in the URL, and `Gateway` never shows them: what a log line names is `Gateway.url`.

A push never raises: `push` returns what happened (the caller logs it in one line); a run whose Pushgateway is
down must still succeed.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from statekeeper.metrics.figures import Sample
from statekeeper.metrics.names import Kind, spec

DEFAULT_PORT = 9091
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Gateway:
    """Where to push: `url` (scheme://host:port[/path], never with credentials) and basic-auth credentials."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_connection(cls, host: str, port: int | None = None, schema: str | None = None,
                        login: str | None = None, password: str | None = None,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> Gateway:
        """From an Airflow connection's parts: `host` a host name or a whole URL (its scheme, port, path and any
        user:password in it are taken apart), `schema` http or https (default http), `port` default 9091."""
        if not host:
            raise ValueError("the Pushgateway connection has no host")
        parts = urlsplit(host if "://" in host else f"{schema or 'http'}://{host}")
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"the Pushgateway connection's scheme must be http or https, not {parts.scheme!r}")
        user = login or parts.username
        secret = password or parts.password
        netloc = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else (parts.hostname or "")
        netloc += f":{port or parts.port or DEFAULT_PORT}"
        url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        return cls(url, user or None, secret or None, timeout_s)


@dataclass(frozen=True)
class Group:
    """The grouping key: the Pushgateway job label and the DAG and warehouse (a run replaces its predecessor's)."""

    job: str
    dag: str
    warehouse: str

    def key(self) -> dict[str, str]:
        return {"dag": self.dag, "warehouse": self.warehouse}

    def describe(self) -> str:
        return f"job={self.job}, dag={self.dag}, warehouse={self.warehouse}"


@dataclass(frozen=True)
class PushOutcome:
    pushed: bool
    series: int
    message: str


def collector(samples: Iterable[Sample]) -> Any:
    """A prometheus-client collector holding `samples`, typed and described by statekeeper.metrics.names."""
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector

    by_name: dict[str, list[Sample]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)

    class Samples(Collector):
        def collect(self) -> Iterator[Any]:
            for name in sorted(by_name):
                metric = spec(name)
                family_type = CounterMetricFamily if metric.kind is Kind.COUNTER else GaugeMetricFamily
                family = family_type(metric.base_name, metric.help, labels=list(metric.labels))
                for s in by_name[name]:
                    family.add_metric([value for _, value in s.labels], s.value)
                yield family

    return Samples()


def registry_of(samples: Iterable[Sample]) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector(samples))
    return registry


def exposition(samples: Iterable[Sample]) -> str:
    """The samples in Prometheus's text format (what a push sends)."""
    from prometheus_client import generate_latest

    return generate_latest(registry_of(samples)).decode()


def push(gateway: Gateway, group: Group, samples: list[Sample]) -> PushOutcome:
    """Replace the group's metrics at the Pushgateway with `samples`."""
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    def handler(url: str, method: str, timeout: float | None, headers: list, data: bytes) -> Any:
        if gateway.username is not None:
            return basic_auth_handler(url, method, timeout, headers, data, gateway.username, gateway.password)
        return default_handler(url, method, timeout, headers, data)

    try:
        push_to_gateway(gateway.url, job=group.job, registry=registry_of(samples), grouping_key=group.key(),
                        timeout=gateway.timeout_s, handler=handler)
    except Exception as exc:   # unreachable, refused, an HTTP error, a timeout: the run goes on
        reason = getattr(exc, "reason", None) or exc
        return PushOutcome(False, len(samples), f"{type(exc).__name__}: {reason}")
    return PushOutcome(True, len(samples), "")
