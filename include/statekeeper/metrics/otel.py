"""The edge to OpenTelemetry: the same samples through the OTel metrics API, for a deployment whose Airflow sends
its own metrics through OTel (`[metrics] otel_on`), so that one pipeline carries both.

The exporter goes where Airflow's own metrics go, chosen the way Airflow chooses it: the standard OTLP
environment (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`, with
`OTEL_EXPORTER_OTLP_PROTOCOL` grpc or http/protobuf, headers and certificates from the same environment) when
it names an endpoint, else `[metrics] otel_host`/`otel_port` (`otel_ssl_active`) over http/protobuf at
`/v1/metrics`. The service name is Airflow's (`OTEL_SERVICE_NAME`, else `[metrics] otel_service`, else
`airflow`). Every gauge is an observable gauge and every counter an observable (cumulative) counter named as
in statekeeper.metrics.names without `_total` (OTel's Prometheus exporters add it back), with the sample's
labels and `job`, `dag` and `warehouse` as attributes; one export, flushed before the task ends.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statekeeper.metrics.figures import Sample
from statekeeper.metrics.names import Kind, spec
from statekeeper.metrics.push import Group, PushOutcome

DEFAULT_TIMEOUT_S = 10.0
SCOPE_NAME = "statekeeper"


@dataclass(frozen=True)
class OtelTarget:
    """Where the OTLP exporter sends: `endpoint` (None: the OTEL_EXPORTER_OTLP_* environment names it)."""

    endpoint: str | None
    protocol: str              # "http/protobuf" or "grpc"
    service_name: str
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, *, host: str | None = None, port: int | None = None,
                ssl_active: bool = False, service_name: str | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> OtelTarget:
        """Airflow's choice of exporter (its `[metrics] otel_*` settings as `host`, `port`, ...)."""
        env = os.environ if environ is None else environ
        service = env.get("OTEL_SERVICE_NAME") or service_name or "airflow"
        if env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            protocol = (env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                        or "http/protobuf")
            return cls(None, protocol, service, timeout_s)
        if not host or not port:
            raise ValueError("[metrics] otel_on is set but neither OTEL_EXPORTER_OTLP_ENDPOINT nor [metrics] "
                             "otel_host and otel_port name a collector")
        scheme = "https" if ssl_active else "http"
        return cls(f"{scheme}://{host}:{port}/v1/metrics", "http/protobuf", service, timeout_s)

    def describe(self) -> str:
        return self.endpoint or f"the OTLP endpoint of the environment ({self.protocol})"


def export(target: OtelTarget, group: Group, samples: list[Sample]) -> PushOutcome:
    """One export of `samples`; never raises (the outcome says what happened)."""
    try:
        return _export(target, group, samples)
    except Exception as exc:   # a missing exporter package, a bad endpoint: the run goes on
        return PushOutcome(False, len(samples), f"{type(exc).__name__}: {exc}")


def _export(target: OtelTarget, group: Group, samples: list[Sample]) -> PushOutcome:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    inner = _exporter(target)

    class Recording(MetricExporter):
        """The OTLP exporter, remembering whether its export went through (the SDK only logs a failure)."""

        def __init__(self) -> None:
            super().__init__(preferred_temporality=inner._preferred_temporality,
                             preferred_aggregation=inner._preferred_aggregation)
            self.results: list[Any] = []

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            result = inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            self.results.append(result)
            return result

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return inner.force_flush(timeout_millis)

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            inner.shutdown(timeout_millis=timeout_millis, **kwargs)

    recording = Recording()
    # An infinite interval: no background thread; the one export is the flush below.
    reader = PeriodicExportingMetricReader(recording, export_interval_millis=float("inf"),
                                           export_timeout_millis=target.timeout_s * 1000)
    provider = MeterProvider(resource=Resource.create({SERVICE_NAME: target.service_name}), metric_readers=[reader])
    try:
        meter = provider.get_meter(SCOPE_NAME)
        common = {"job": group.job, "dag": group.dag, "warehouse": group.warehouse}
        by_name: dict[str, list[Sample]] = {}
        for s in samples:
            by_name.setdefault(s.name, []).append(s)
        for name, rows in sorted(by_name.items()):
            metric = spec(name)
            observations = [Observation(s.value, {**dict(s.labels), **common}) for s in rows]

            def observe(options: CallbackOptions, observations: list[Any] = observations) -> list[Any]:
                return observations

            create = meter.create_observable_counter if metric.kind is Kind.COUNTER else meter.create_observable_gauge
            create(metric.base_name, callbacks=[observe], unit=metric.unit, description=metric.help)
        provider.force_flush(timeout_millis=target.timeout_s * 1000)
    finally:
        provider.shutdown(timeout_millis=target.timeout_s * 1000)
    if recording.results and all(r is MetricExportResult.SUCCESS for r in recording.results):
        return PushOutcome(True, len(samples), "")
    return PushOutcome(False, len(samples), "the OTLP export failed (the OpenTelemetry SDK's log says why)"
                       if recording.results else "nothing was exported")


def _exporter(target: OtelTarget) -> Any:
    if target.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    return OTLPMetricExporter(endpoint=target.endpoint, timeout=target.timeout_s)
