"""The Statekeeper page's own logic without a running Airflow: the nav bar (escaped, the shown run
selected), where it goes in a page, and the answers for each situation (the Variables replaced by a
stub, reports published with ReportStore into a local warehouse)."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from statekeeper.report.store import ReportRef, ReportStore
from statekeeper.storage.errors import UnreadableObjectError
from statekeeper.tables.warehouse import Warehouse
from tests.orchestration.support import plugin_module

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PAGE = "<!DOCTYPE html><html><head><title>r</title></head><body>\n<!-- statekeeper:nav -->\n<h1>{}</h1></body></html>"


@pytest.fixture(scope="module")
def page():
    return plugin_module("report_page")


def ref(run_dir: str, minutes: int = 0) -> ReportRef:
    return ReportRef(run_dir, run_dir, T0 + timedelta(minutes=minutes), f"file:///w/_reports/runs/{run_dir}/index.html")


def test_nav_lists_runs_selects_the_shown_one_and_escapes(page):
    runs = [ref("rpt-2", 1), ref("rpt-1")]
    nav = page.nav_html(runs, runs[1], "file:///tmp/wh<script>alert(1)</script>&x")
    assert '<select name="run" id="statekeeper-run-picker"' in nav
    assert nav.index('value="rpt-2"') < nav.index('value="rpt-1"')
    assert '<option value="rpt-1" selected>' in nav and '<option value="rpt-2">' in nav
    assert "<script>" not in nav and "file:///tmp/wh&lt;script&gt;alert(1)&lt;/script&gt;&amp;x" in nav
    # a run beyond the listed ones is still offered, first
    nav = page.nav_html(runs, ref("old-run"), "file:///w")
    assert nav.index('value="old-run" selected') < nav.index('value="rpt-2"')


def test_nav_goes_where_the_marker_is_else_after_body(page):
    nav = "<nav>N</nav>"
    assert page.inject_nav(PAGE.format("x"), nav).count(nav) == 1
    assert "statekeeper:nav" not in page.inject_nav(PAGE.format("x"), nav)
    assert page.inject_nav('<html><body class="a">t</body>', nav) == f'<html><body class="a">{nav}t</body>'
    assert page.inject_nav('<HTML><BODY>t', nav) == f"<HTML><BODY>{nav}t"
    assert page.inject_nav("fragment", nav) == nav + "fragment"


@pytest.fixture
def warehouse(tmp_path, page, monkeypatch):
    wh = Warehouse(str(tmp_path / "wh"))
    variables = {page.WAREHOUSE_VARIABLE: wh.uri}
    monkeypatch.setattr(page, "_variable", lambda key: variables.get(key, ""))
    return wh, variables


def body(response) -> str:
    return response.body.decode()


def test_answers(page, warehouse):
    wh, variables = warehouse
    resp = page.report(None)       # no report yet: says what writes one
    assert resp.status_code == 200 and "No report yet" in body(resp) and "statekeeper report" in body(resp)
    assert resp.headers["cache-control"] == "no-store"

    store = ReportStore(wh)
    store.publish("rpt:1", PAGE.format("first").encode(), {}, T0)
    store.publish("rpt-2", PAGE.format("second <b>").encode(), {}, T0)
    resp = page.report(None)
    assert resp.status_code == 200 and resp.headers["cache-control"] == "no-store"
    assert "<h1>second <b></h1>" in body(resp) and 'data-run="rpt-2"' in body(resp)
    assert "statekeeper:nav" not in body(resp)
    resp = page.report("rpt_1")
    assert resp.status_code == 200 and "<h1>first</h1>" in body(resp)
    assert '<option value="rpt_1" selected>' in body(resp)
    for bad in ("nope", "../wh", "..", "a/b", "/etc/passwd"):
        resp = page.report(bad)
        assert resp.status_code == 404, bad
        assert "No such report" in body(resp)
    assert page.report("  ").status_code == 200           # an empty choice is the latest
    assert [r["run_dir"] for r in json.loads(page.runs().body)] == ["rpt-2", "rpt_1"]

    variables[page.WAREHOUSE_VARIABLE] = ""
    resp = page.report(None)
    assert resp.status_code == 200 and "Set the Airflow Variable statekeeper_warehouse" in body(resp)
    assert page.runs().status_code == 200


def test_unreadable_storage_names_the_class_not_the_details(page, warehouse, monkeypatch):
    wh, _ = warehouse

    def boom(self, run_dir=None):
        raise UnreadableObjectError("s3://b/_reports/latest.json: AccessDenied for key AKIA-SECRET")

    monkeypatch.setattr(ReportStore, "page", boom)
    text = body(page.report(None))
    assert "Warehouse not readable" in text and "UnreadableObjectError" in text and wh.uri in text
    assert "AKIA-SECRET" not in text and "AccessDenied" not in text


def test_app_is_behind_login_with_no_open_routes(page):
    from fastapi.routing import APIRoute

    assert page.app.openapi_url is None and page.app.docs_url is None and page.app.redoc_url is None
    assert {r.path for r in page.app.routes} == {"/", "/runs"}
    assert all(isinstance(r, APIRoute) and r.dependencies == page.app.router.dependencies for r in page.app.routes)
    assert len(page.app.router.dependencies) == 1
    plugin = page.StatekeeperReportPlugin
    assert plugin.fastapi_apps == [{"app": page.app, "url_prefix": "/statekeeper", "name": "Statekeeper"}]
    assert plugin.external_views[0]["href"] == "statekeeper/" and plugin.external_views[0]["url_route"] == "statekeeper"


def test_s3_warehouse_through_the_storage_connection(page, s3_config, s3_bucket, monkeypatch):
    """An s3:// warehouse is read with the 'aws' connection the Variable names; the API server's own
    environment holds no S3 settings."""
    wh = Warehouse(f"s3://{s3_bucket}/statekeeper", s3_config)
    ReportStore(wh).publish("rpt-s3", PAGE.format("from s3").encode(), {}, T0)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "STATEKEEPER_S3_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_STATEKEEPER_PAGE_S3", json.dumps({
        "conn_type": "aws", "login": s3_config.access_key_id, "password": s3_config.secret_access_key,
        "extra": {"endpoint_url": s3_config.endpoint, "region_name": s3_config.region, "addressing_style": "path"}}))
    variables = {page.WAREHOUSE_VARIABLE: wh.uri, page.STORAGE_CONN_VARIABLE: "statekeeper_page_s3"}
    monkeypatch.setattr(page, "_variable", lambda key: variables.get(key, ""))
    resp = page.report(None)
    assert resp.status_code == 200 and "<h1>from s3</h1>" in body(resp), body(resp)
    assert s3_config.secret_access_key not in body(resp)
    assert [r["run_dir"] for r in json.loads(page.runs().body)] == ["rpt-s3"]
    # without the connection the page says it cannot read the warehouse (and names no secret)
    variables[page.STORAGE_CONN_VARIABLE] = ""
    text = body(page.report(None))
    assert "Warehouse not readable" in text and f"s3://{s3_bucket}/statekeeper" in text
