"""The Statekeeper page of the Airflow UI (Browse > Statekeeper): the warehouse's maintenance report.

    GET /statekeeper/             the latest report page
    GET /statekeeper/?run=<dir>   the report of one run (a run directory name, see report.store)
    GET /statekeeper/runs         the stored runs, newest first (JSON)

The UI shows the page in an iframe at /plugin/statekeeper. Airflow mounts plugin apps without any
login, so the app itself requires an authenticated user (the UI's `_token` cookie or a bearer token);
anonymous requests get 401.

The warehouse is the Airflow Variable `statekeeper_warehouse` (what the DAGs' scheduled runs use); an
s3:// warehouse is read with the 'aws' connection named by the Variable `statekeeper_storage_conn_id`,
else with the API server's own environment (as a task without a storage connection would be).

Reads go through statekeeper.report.store only: no deltalake or pyspark in the API server, whose
workers are forked (deltalake panics in a forked child).

Airflow's plugin loader imports every .py file under plugins/ as a top-level module and registers the
AirflowPlugin subclasses it finds, which is how StatekeeperReportPlugin below is discovered.
"""
from __future__ import annotations

import html
import logging
import re

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from airflow.api_fastapi.core_api.security import requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from statekeeper.report.store import ReportNotFound, ReportRef, ReportStore
from statekeeper.storage.config import StorageConfig
from statekeeper.tables.warehouse import Warehouse

log = logging.getLogger(__name__)

WAREHOUSE_VARIABLE = "statekeeper_warehouse"
STORAGE_CONN_VARIABLE = "statekeeper_storage_conn_id"
NAV_MARKER = "<!-- statekeeper:nav -->"
# Pages change with every run and may be private: never let a browser or proxy keep one.
NO_STORE = {"Cache-Control": "no-store"}
_BODY_TAG = re.compile(r"<body\b[^>]*>", re.IGNORECASE)


class PageError(Exception):
    """Something the page explains to the user instead of a report (message is plain text)."""

    def __init__(self, title: str, message: str, status: int = 200) -> None:
        super().__init__(message)
        self.title, self.message, self.status = title, message, status


# -- pure parts (tested without Airflow running) -----------------------------------------------------

def nav_html(runs: list[ReportRef], shown: ReportRef, warehouse_uri: str) -> str:
    """The bar put on top of a report: a run picker (a plain GET form, so it works without script
    and inside the UI's iframe) and the warehouse it reads."""
    e = html.escape
    listed = runs if any(r.run_dir == shown.run_dir for r in runs) else [shown, *runs]
    options = "".join(
        f'<option value="{e(r.run_dir)}"{" selected" if r.run_dir == shown.run_dir else ""}>'
        f"{e(r.run_dir)} ({e(r.generated_at.strftime('%Y-%m-%d %H:%M:%S %Z').strip())})</option>"
        for r in listed)
    return (
        f'<nav id="statekeeper-nav" data-run="{e(shown.run_dir)}" style="font:14px sans-serif;padding:6px 10px;'
        'margin:0 0 8px;background:#eef1f5;border-bottom:1px solid #c8ccd2;display:flex;gap:16px;'
        'align-items:center;flex-wrap:wrap">'
        '<form method="get" action="" style="margin:0">'
        '<label for="statekeeper-run-picker">Report of run </label>'
        '<select name="run" id="statekeeper-run-picker" onchange="this.form.submit()">'
        f"{options}</select> "
        '<button type="submit" id="statekeeper-run-show">Show</button></form>'
        f'<span>Warehouse: <code id="statekeeper-warehouse">{e(warehouse_uri)}</code></span></nav>')


def inject_nav(page: str, nav: str) -> str:
    """`page` with `nav` in place of the generator's marker, else right after <body ...>, else first."""
    if NAV_MARKER in page:
        return page.replace(NAV_MARKER, nav, 1)
    body = _BODY_TAG.search(page)
    if body:
        return page[:body.end()] + nav + page[body.end():]
    return nav + page


def message_page(title: str, message: str, *, link_latest: bool = False) -> str:
    """A small page for everything that is not a report (message is plain text, escaped here)."""
    e = html.escape
    latest = '<p><a href="./">Show the latest report</a></p>' if link_latest else ""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)}</title></head>'
            f'<body style="font:15px sans-serif;margin:0"><div id="statekeeper-message" style="padding:16px">'
            f"<h2>{e(title)}</h2><p>{e(message)}</p>{latest}</div></body></html>")


# -- reading Airflow's settings ---------------------------------------------------------------------

def _variable(key: str) -> str:
    from airflow.models.variable import Variable

    return (Variable.get(key, default_var="") or "").strip()


def _storage(warehouse_uri: str) -> StorageConfig:
    if not warehouse_uri.startswith("s3://"):
        return StorageConfig()
    conn_id = _variable(STORAGE_CONN_VARIABLE)
    if not conn_id:
        return StorageConfig.from_env()
    from airflow.models.connection import Connection
    # Absolute, as operators.py imports its siblings: the loader also imports these files top-level.
    from statekeeper_airflow.connections import storage_env_from_connection

    conn = Connection.get_connection_from_secrets(conn_id)
    extra = conn.extra_dejson if conn.extra else {}
    env = storage_env_from_connection(conn.conn_type, conn.login, conn.password, extra)
    return StorageConfig.from_env(env)


def _store() -> ReportStore:
    uri = _variable(WAREHOUSE_VARIABLE)
    if not uri:
        raise PageError("No warehouse configured",
                        f"Set the Airflow Variable {WAREHOUSE_VARIABLE} to the warehouse the maintenance DAG writes "
                        "(a local path or an s3:// prefix); for s3:// also set "
                        f"{STORAGE_CONN_VARIABLE} to an 'aws' connection id.")
    try:
        return ReportStore(Warehouse(uri, _storage(uri)))
    except Exception as exc:  # noqa: BLE001 - any failure here means the page cannot read the warehouse
        raise _unreadable(uri, exc) from exc


def _unreadable(uri: str, exc: Exception) -> PageError:
    # Only the class reaches the page; the message (which names objects, never credentials: StorageConfig
    # masks its secrets) goes to the API server's log.
    log.warning("Statekeeper page cannot read warehouse %s: %s: %s", uri, type(exc).__name__, exc)
    return PageError("Warehouse not readable",
                     f"Cannot read the reports of warehouse {uri} ({type(exc).__name__}); the API server's "
                     "log has the details.")


# -- the app ----------------------------------------------------------------------------------------

app = FastAPI(title="Statekeeper", dependencies=[Depends(requires_authenticated())],
              # Starlette routes (docs, schema) would bypass the dependency above: none at all.
              docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/", response_class=HTMLResponse)
def report(run: str | None = None) -> HTMLResponse:
    run_dir = run.strip() if run and run.strip() else None
    try:
        store = _store()
        try:
            ref, page = store.page(run_dir)
            nav = nav_html(store.runs(), ref, store.warehouse.uri)
        except ReportNotFound as exc:
            if run_dir is None:
                raise PageError("No report yet", str(exc)) from exc
            raise PageError("No such report", str(exc), status=404) from exc
        except Exception as exc:  # noqa: BLE001 - storage failures of any kind
            raise _unreadable(store.warehouse.uri, exc) from exc
    except PageError as err:
        return HTMLResponse(message_page(err.title, err.message, link_latest=err.status == 404),
                            status_code=err.status, headers=NO_STORE)
    return HTMLResponse(inject_nav(page.decode("utf-8", errors="replace"), nav), headers=NO_STORE)


@app.get("/runs")
def runs() -> JSONResponse:
    try:
        store = _store()
        try:
            found = store.runs()
        except Exception as exc:  # noqa: BLE001
            raise _unreadable(store.warehouse.uri, exc) from exc
    except PageError as err:
        return JSONResponse({"error": err.title, "message": err.message}, status_code=err.status,
                            headers=NO_STORE)
    return JSONResponse([r.to_mapping() for r in found], headers=NO_STORE)


class StatekeeperReportPlugin(AirflowPlugin):
    name = "statekeeper"
    fastapi_apps = [{"app": app, "url_prefix": "/statekeeper", "name": "Statekeeper"}]
    external_views = [{"name": "Statekeeper", "href": "statekeeper/", "url_route": "statekeeper",
                       "destination": "nav", "category": "browse"}]
