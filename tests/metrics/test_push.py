"""The push at the edge: to a real Pushgateway (Debian's, on loopback), with no Pushgateway configured, with one that
cannot be reached, with credentials, and through OpenTelemetry to an OTLP receiver on loopback. Driven through the
Airflow side (statekeeper_airflow.metrics_push, what a DAG's last step calls) with real Airflow connections."""
from __future__ import annotations

import base64
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from statekeeper.metrics.gather import gather
from statekeeper.metrics.names import Scope, spec
from statekeeper.metrics.push import Gateway
from tests.metrics.support import build
from tests.orchestration.support import plugin_module
from tests.plugins.loopback import free_port

PASSWORD = "pushgateway-secret-7d1f"
DAG = "checkpoint_maintenance"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("push-wh") / "warehouse")


@pytest.fixture(scope="module", autouse=True)
def airflow_logging():
    """Airflow sets up its logging when first imported, replacing the handlers pytest captures with: import it
    before any test of this module captures."""
    plugin_module("metrics_push")
    from airflow.sdk import BaseHook  # noqa: F401


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="test.metrics")
    return logging.getLogger("test.metrics")


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.metrics"]


def connection(monkeypatch, conn_id: str, **fields) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "http", **fields}))
    return conn_id


def settings(store, conn_id: str, **extra) -> dict:
    return {"conn_id": conn_id, "job": "", "thresholds": {"dr_rpo": "", "index_age": "2h", "gc_age": "", "follow_refusals": ""},
            "groups": [{"scope": "maintenance", "warehouse": store.warehouse.uri, "storage_conn_id": ""}], **extra}


def pushed_groups(pushgateway) -> dict[tuple, dict]:
    """{(job, dag, warehouse): {metric: [(labels, value)]}} from the Pushgateway's API."""
    out = {}
    for group in pushgateway.groups():
        labels = group["labels"]
        metrics = {}
        for name, family in group.items():
            if name in ("labels", "last_push_successful", "push_time_seconds", "push_failure_time_seconds"):
                continue
            metrics[name] = [(m["labels"], float(m["value"])) for m in family["metrics"]]
        out[(labels["job"], labels.get("dag"), labels.get("warehouse"))] = metrics
    return out


def test_a_push_replaces_the_group_of_its_dag_and_warehouse(store, pushgateway, monkeypatch, log, caplog):
    push = plugin_module("metrics_push")
    conn = connection(monkeypatch, "sk_pgw_up", host="127.0.0.1", port=pushgateway.port)
    push.push_run_figures(settings(store, conn), DAG, log)
    expected = gather(store.warehouse, Scope.MAINTENANCE)
    [line] = lines(caplog)
    assert line == (f"metrics: pushed {len(expected)} series to the Pushgateway {pushgateway.url} (job=statekeeper, "
                    f"dag={DAG}, warehouse {store.warehouse.uri})")
    group = pushed_groups(pushgateway)[("statekeeper", DAG, store.warehouse.uri)]
    for s in expected:
        values = [v for labels, v in group[s.name] if all(labels.get(k) == val for k, val in s.labels)]
        assert values == [pytest.approx(s.value if s.name != "statekeeper_threshold_index_age_seconds" else 7200)], s
    # the next run of the same DAG and warehouse replaces the group: a threshold back at its default
    caplog.clear()
    push.push_run_figures({**settings(store, conn), "thresholds": {}}, DAG, log)
    group = pushed_groups(pushgateway)[("statekeeper", DAG, store.warehouse.uri)]
    assert [v for _, v in group["statekeeper_threshold_index_age_seconds"]] == [26 * 3600]
    assert len(lines(caplog)) == 1


def test_no_pushgateway_configured_pushes_nothing_and_says_so_once(store, log, caplog, monkeypatch):
    monkeypatch.delenv("AIRFLOW__METRICS__OTEL_ON", raising=False)
    plugin_module("metrics_push").push_run_figures(settings(store, ""), DAG, log)
    assert lines(caplog) == ["metrics: no Pushgateway configured (the form's metrics_conn_id and the Variable "
                             "statekeeper_metrics_conn_id are empty): nothing pushed"]


def test_an_unreachable_pushgateway_is_one_warning_without_the_password(store, monkeypatch, log, caplog):
    port = free_port()   # nothing listens there
    conn = connection(monkeypatch, "sk_pgw_down", host="127.0.0.1", port=port, login="statekeeper",
                      password=PASSWORD)
    plugin_module("metrics_push").push_run_figures(settings(store, conn), DAG, log)
    [record] = [r for r in caplog.records if r.name == "test.metrics"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith(f"metrics: the Pushgateway http://127.0.0.1:{port} did not take the figures of "
                              f"{store.warehouse.uri} (URLError: "), message
    assert message.endswith("the run goes on without them")
    assert PASSWORD not in caplog.text and "statekeeper:" not in message


def test_a_missing_connection_or_warehouse_is_one_line_each(store, monkeypatch, log, caplog, tmp_path, pushgateway):
    push = plugin_module("metrics_push")
    push.push_run_figures(settings(store, "sk_no_such_connection"), DAG, log)
    assert lines(caplog) == ["metrics: the Pushgateway connection 'sk_no_such_connection' is not defined (create it, "
                             "or empty the Variable statekeeper_metrics_conn_id): nothing pushed"]
    caplog.clear()
    conn = connection(monkeypatch, "sk_pgw_up2", host=f"http://127.0.0.1:{pushgateway.port}")
    bad = {"scope": "maintenance", "warehouse": "hdfs://nowhere/warehouse", "storage_conn_id": ""}
    push.push_run_figures({**settings(store, conn), "groups": [bad]}, "checkpoint_elsewhere", log)
    [line] = lines(caplog)
    assert line.startswith("metrics: could not read the maintenance figures of warehouse hdfs://nowhere/warehouse ("), line


class Recorder(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, str | None]] = []

    def do_PUT(self):   # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.requests.append(("PUT", self.path, self.headers.get("Authorization")))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_credentials_go_as_basic_auth_never_in_the_url_or_the_log(store, monkeypatch, log, caplog):
    """The Pushgateway's own basic auth needs a bcrypt hash it cannot be given here; a loopback server that records
    what arrives shows what the push sends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        conn = connection(monkeypatch, "sk_pgw_auth", host=f"http://statekeeper:{PASSWORD}@127.0.0.1:{port}/gw/")
        plugin_module("metrics_push").push_run_figures(settings(store, conn), DAG, log)
    finally:
        server.shutdown()
    [(method, path, auth)] = Recorder.requests
    assert method == "PUT" and path.startswith("/gw/metrics/job/statekeeper/")
    assert "dag/checkpoint_maintenance" in path and PASSWORD not in path
    assert auth == "Basic " + base64.b64encode(f"statekeeper:{PASSWORD}".encode()).decode()
    [line] = lines(caplog)
    assert f"to the Pushgateway http://127.0.0.1:{port}/gw " in line and PASSWORD not in caplog.text


@pytest.mark.parametrize("host, port, schema, url", [
    ("pgw.example", None, None, "http://pgw.example:9091"),
    ("pgw.example", 443, "https", "https://pgw.example:443"),
    ("https://u:p@pgw.example:9443/push/", None, None, "https://pgw.example:9443/push"),
    ("[::1]", 9091, "http", "http://[::1]:9091"),
])
def test_gateway_url_from_a_connection(host, port, schema, url):
    gateway = Gateway.from_connection(host, port, schema)
    assert gateway.url == url and "p@" not in repr(gateway)


def test_gateway_refuses_what_is_no_http_endpoint():
    with pytest.raises(ValueError, match="no host"):
        Gateway.from_connection("")
    with pytest.raises(ValueError, match="http or https"):
        Gateway.from_connection("ftp://pgw.example")


class OtlpReceiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP metrics endpoint: keeps each ExportMetricsServiceRequest, decoded with OTel's own protobufs."""

    received: list = []

    def do_POST(self):   # noqa: N802
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (ExportMetricsServiceRequest,
                                                                                  ExportMetricsServiceResponse)

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        OtlpReceiver.received.append((self.path, request))
        payload = ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_with_otel_on_the_same_figures_go_through_opentelemetry(store, monkeypatch, log, caplog):
    server = ThreadingHTTPServer(("127.0.0.1", 0), OtlpReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        # Airflow's own settings, as a deployment sets them (no OTEL_* environment: otel_host/otel_port are used)
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SERVICE_NAME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AIRFLOW__METRICS__OTEL_ON", "True")
        monkeypatch.setenv("AIRFLOW__METRICS__OTEL_HOST", "127.0.0.1")
        monkeypatch.setenv("AIRFLOW__METRICS__OTEL_PORT", str(port))
        plugin_module("metrics_push").push_run_figures(settings(store, ""), DAG, log)
    finally:
        server.shutdown()
    expected = gather(store.warehouse, Scope.MAINTENANCE)
    assert lines(caplog) == [f"metrics: exported {len(expected)} series through OpenTelemetry to "
                             f"http://127.0.0.1:{port}/v1/metrics (service airflow, dag={DAG}, warehouse "
                             f"{store.warehouse.uri})"]
    [(path, request)] = OtlpReceiver.received
    assert path == "/v1/metrics"
    [resource] = request.resource_metrics
    assert {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"] == "airflow"
    got = {}
    for scope in resource.scope_metrics:
        assert scope.scope.name == "statekeeper"
        for metric in scope.metrics:
            kind = metric.WhichOneof("data")
            points = getattr(metric, kind).data_points
            if kind == "sum":
                assert metric.sum.is_monotonic
            for point in points:
                attrs = {a.key: a.value.string_value for a in point.attributes}
                assert (attrs.pop("job"), attrs.pop("dag"), attrs.pop("warehouse")) == (
                    "statekeeper", DAG, store.warehouse.uri)
                value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
                got[(metric.name, metric.unit, kind, tuple(sorted(attrs.items())))] = value
    want = {(spec(s.name).base_name, spec(s.name).unit, "sum" if spec(s.name).kind.value == "counter" else "gauge",
             tuple(sorted(s.labels))): (7200 if s.name == "statekeeper_threshold_index_age_seconds" else s.value)
            for s in expected}
    assert got == pytest.approx(want)
