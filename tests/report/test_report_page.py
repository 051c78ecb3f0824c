"""The Statekeeper page in the Airflow UI, in a real browser, over reports of a real Flink store.

A private copy of the chain_claim store (jobs A <- B <- C: B restored from A, C from B, so B's and
C's checkpoints use files in A's shared/) is indexed, chained, validated and reported twice into one
warehouse: run rpt-1 intact, then run rpt-2 after deleting one file in A's shared/ that C's newest
checkpoint uses (as the validation tests' `shared` damage). One Airflow API server whose Variable
statekeeper_warehouse names that warehouse serves the UI; headless Chromium logs in through the UI's
login form and looks at Browse > Statekeeper (/plugin/statekeeper, the page in an iframe):

* the latest report (rpt-2) shows C's lineage node and health row as not restorable;
* the run picker brings back rpt-1, where A, B and C are all restorable;
* anonymous requests to the plugin's app are refused (401), token-authenticated ones served.

Screenshots of both views are kept (tests/plugins/browser.py: $STATEKEEPER_TEST_ARTIFACTS, else
.artifacts/report_page/).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store, store_roots
from tests.index.support import run_index, table_rows
from tests.plugins.browser import AirflowUI, http, open_plugin_page, screenshot

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.airflow, pytest.mark.browser, pytest.mark.slow]

VERSION = "2.3.0" if "2.3.0" in harness.FLINK_VERSIONS else harness.FLINK_VERSIONS[-1]
JOBS = ("A", "B", "C")


@dataclass
class Site:
    ui: AirflowUI
    warehouse: Warehouse
    job_dirs: dict[str, str]          # logical name -> job directory name (the Flink job id)
    unrestorable: set[str]            # logical names of the jobs whose newest checkpoint uses the victim
    victim: str


def _pipeline(spark, roots: list[str], warehouse: Warehouse, n: int) -> tuple[str, str]:
    """index -> chains -> validate -> report, as the maintenance DAG runs them; (validation status,
    report URI)."""
    from statekeeper.chains.job import SUCCEEDED, ComputeChains
    from statekeeper.report.job import BuildReport
    from statekeeper.validate.job import ValidateCheckpoints
    from statekeeper.validate.options import ValidateOptions

    index = run_index(spark, roots, warehouse, run_id=f"idx-{n}")
    assert index.status == "succeeded", index.summary()
    chains = ComputeChains(spark).warehouse(warehouse).run_id(f"chains-{n}").progress_interval(0).execute()
    assert chains.status == SUCCEEDED, chains.summary()
    validation = (ValidateCheckpoints(spark).warehouse(warehouse).run_id(f"val-{n}")
                  .progress_interval(0).configure(ValidateOptions(roots=tuple(roots), quality_suite=False)).execute())
    report = BuildReport(spark).warehouse(warehouse.uri).run_id(f"rpt-{n}").progress_interval(0).execute()
    assert report.status == "succeeded" and report.report_uri, report.summary()
    return str(validation.status), report.report_uri


@pytest.fixture(scope="module")
def site(spark, flink_fixture, airflow_ui, tmp_path_factory) -> Site:
    from statekeeper.report.store import ReportStore

    base = tmp_path_factory.mktemp("report-page")
    warehouse = Warehouse(str(base / "warehouse"))
    # Started first: the API server comes up while Spark works below (it reads the warehouse per request).
    ui = airflow_ui(warehouse.uri)
    fx = flink_fixture(VERSION, "chain_claim")
    copy = relocate_store(fx.root, str(base / "store"))
    old = normalize_uri(str(fx.root))

    def moved(path: str | Path) -> str:
        return copy + normalize_uri(str(path))[len(old):]

    roots = store_roots(copy)
    status, uri = _pipeline(spark, roots, warehouse, 1)
    assert status == "ok", status
    assert ReportStore(warehouse).latest().page_uri == uri

    # The victim: a file in A's shared/ that C's newest checkpoint uses, of those the fewest snapshots
    # use (from the index's references, which the index tests hold to Flink's own reading).
    newest = {name: moved(Path(fx.job(name)["retained_checkpoints"][-1]) / "_metadata") for name in JOBS}
    a_shared = moved(fx.job("A")["job_dir"]) + "/shared/"
    users: dict[str, set[str]] = {}
    for ref in table_rows(warehouse, "references"):
        users.setdefault(ref["file_uri"], set()).add(ref["snapshot_uri"])
    candidates = [f for f, snaps in users.items() if f.startswith(a_shared) and newest["C"] in snaps]
    assert candidates, f"C's newest checkpoint {newest['C']} uses nothing in {a_shared}"
    victim = min(candidates, key=lambda f: (len(users[f]), f))
    Path(victim[len("file://"):]).unlink()

    status, uri = _pipeline(spark, roots, warehouse, 2)
    assert status == "unrestorable", status
    assert ReportStore(warehouse).latest().page_uri == uri
    return Site(ui=ui.ready(), warehouse=warehouse,
                job_dirs={name: Path(fx.job(name)["job_dir"]).name for name in JOBS},
                unrestorable={name for name in JOBS if newest[name] in users[victim]}, victim=victim)


def _node(driver, job_dir: str):
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, f'#lineage svg g.node[data-job-dir="{job_dir}"]')
    assert len(found) == 1, f"{len(found)} lineage nodes for {job_dir}"
    return found[0]


def _row(driver, job_dir: str):
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, f'#health tr[data-job-dir="{job_dir}"]')
    assert len(found) == 1, f"{len(found)} health rows for {job_dir}"
    return found[0]


def _check_job(driver, job_dir: str, restorable: bool) -> None:
    from selenium.webdriver.common.by import By

    node, row = _node(driver, job_dir), _row(driver, job_dir)
    # What the node shows: its <text> lines (its <title> is a tooltip, not drawn).
    lines = [t.text.strip() for t in node.find_elements(By.CSS_SELECTOR, "text") if t.text.strip()]
    label = lines[0].rstrip("…") if lines else ""
    assert len(label) >= 8 and job_dir.startswith(label), f"node of {job_dir} shows {lines}"
    want = "true" if restorable else "false"
    assert (node.get_attribute("data-restorable"), row.get_attribute("data-restorable")) == (want, want), job_dir
    assert ("unrestorable" in (row.get_attribute("class") or "").split()) is not restorable, job_dir
    assert row.is_displayed()


def _picker(driver) -> tuple[list[str], str]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    select = Select(driver.find_element(By.ID, "statekeeper-run-picker"))
    return [o.get_attribute("value") for o in select.options], select.first_selected_option.get_attribute("value")


def _shots(driver, directory: Path, name: str) -> None:
    """The UI with the top of the page (the run picker), then scrolled to the lineage and health
    views, and the health table alone."""
    from selenium.webdriver.common.by import By

    driver.execute_script("window.scrollTo(0, 0)")
    screenshot(driver, directory, f"{name}-top")
    driver.execute_script("arguments[0].scrollIntoView()", driver.find_element(By.ID, "lineage"))
    screenshot(driver, directory, name)
    driver.find_element(By.ID, "health").screenshot(str(directory / f"{name}-health.png"))


def test_report_page_in_the_airflow_ui(site, chromium_driver, artifacts_dir):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver, shots = chromium_driver, artifacts_dir / "report_page"
    shots.mkdir(parents=True, exist_ok=True)
    a, b, c = (site.job_dirs[n] for n in JOBS)
    assert "C" in site.unrestorable

    # The latest report: after the damage, C does not restore.
    open_plugin_page(driver, site.ui, "statekeeper")
    nav = driver.find_element(By.ID, "statekeeper-nav")
    assert nav.get_attribute("data-run") == "rpt-2"
    assert _picker(driver) == (["rpt-2", "rpt-1"], "rpt-2")
    assert driver.find_element(By.ID, "statekeeper-warehouse").text == site.warehouse.uri
    for name in JOBS:
        _check_job(driver, site.job_dirs[name], restorable=name not in site.unrestorable)
    _shots(driver, shots, "latest-rpt-2")

    # The first run, through the run picker: everything restored then.
    Select(driver.find_element(By.ID, "statekeeper-run-picker")).select_by_value("rpt-1")
    WebDriverWait(driver, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: d.find_element(By.ID, "statekeeper-nav").get_attribute("data-run") == "rpt-1")
    assert _picker(driver) == (["rpt-2", "rpt-1"], "rpt-1")
    for job_dir in (a, b, c):
        _check_job(driver, job_dir, restorable=True)
    _shots(driver, shots, "picked-rpt-1")
    driver.switch_to.default_content()


def test_plugin_app_requires_login(site):
    base = site.ui.base
    status, _, _ = http(f"{base}/statekeeper/")
    assert status == 401
    assert http(f"{base}/statekeeper/runs")[0] == 401
    token = site.ui.token()
    status, body, headers = http(f"{base}/statekeeper/", token=token)
    assert status == 200, body[:500]
    assert {k.lower(): v for k, v in headers.items()}.get("cache-control") == "no-store"
    page = body.decode()
    assert 'id="statekeeper-nav" data-run="rpt-2"' in page and "<!-- statekeeper:nav -->" not in page
    status, body, _ = http(f"{base}/statekeeper/runs", token=token)
    assert status == 200 and [r["run_dir"] for r in json.loads(body)] == ["rpt-2", "rpt-1"]
    assert http(f"{base}/statekeeper/?run=nope", token=token)[0] == 404
