"""A real Airflow UI in a real browser: an `airflow api-server` on loopback and headless Chromium.

* `airflow_ui` (module): a factory `start(warehouse) -> AirflowUI` that prepares a private Airflow
  home (`local_airflow_env` + `prepare`, so the Variable `statekeeper_warehouse` is `warehouse`) and
  starts an API server on a free loopback port. It returns at once (a thread polls
  /api/v2/monitor/health); `AirflowUI.ready()` waits for it, so a test can do other work (Spark)
  while the server starts. Only the API
  server runs: it serves the UI, the login and the plugin pages; no DAG runs here. Every server it
  started is stopped at the end of the module: SIGINT to its process group, SIGKILL if it lingers.
* `chromium_driver` (module): Selenium 4 driving Debian's chromium through Debian's chromedriver
  (one source package, so they always match). Both paths are explicit, which skips Selenium
  Manager; SE_OFFLINE=true forbids it any download should it run anyway. Skipped, with the reason,
  only when chromium or chromedriver is not installed (`make setup` installs both).
* `open_plugin_page(driver, ui, route)`: logs in through the UI's own login form when the browser is
  not logged in yet, opens /plugin/<route> and switches into the plugin's iframe.
* `artifacts_dir` / `screenshot(driver, directory, name)`: screenshots kept after the test, in
  $STATEKEEPER_TEST_ARTIFACTS or <repo>/.artifacts/.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from statekeeper.dev.airflow_local import PRIVATE_UMASK, airflow_bin, local_airflow_env, prepare
from tests.plugins.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
_READY_TIMEOUT_S = 240.0
_STOP_TIMEOUT_S = 30.0
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"


def http(url: str, *, method: str = "GET", body: dict | None = None, token: str | None = None,
         timeout: float = 30) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers) of one request; HTTP errors are answers, not exceptions."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


@dataclass
class AirflowUI:
    home: Path
    port: int
    process: subprocess.Popen
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    ready_after: float | None = None       # seconds from start to the first healthy /monitor/health
    _watch: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def watch(self, timeout: float = _READY_TIMEOUT_S) -> None:
        """Poll the health check in the background, so `ready_after` is the server's own start-up
        time even when the test does other work meanwhile."""
        def poll() -> None:
            deadline = time.monotonic() + timeout
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    if http(f"{self.base}/api/v2/monitor/health", timeout=5)[0] == 200:
                        self.ready_after = time.monotonic() - self.started
                        return
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
                time.sleep(0.5)

        self._watch = threading.Thread(target=poll, name=f"airflow-ui-{self.port}", daemon=True)
        self._watch.start()

    def ready(self) -> AirflowUI:
        """Wait until the API server has answered its health check (at once when it already did)."""
        if self._watch is not None:
            self._watch.join()
            self._watch = None
            if self.ready_after is None:
                raise AssertionError(f"airflow api-server did not become healthy (exit {self.process.poll()}):\n"
                                     + self.log_path.read_text(errors="replace")[-5000:])
            print(f"\nairflow api-server on {self.base} healthy {self.ready_after:.1f}s after it was started "
                  f"(log: {self.log_path})")
        assert self.ready_after is not None, "watch() polls the health check"
        return self

    def password(self, user: str = "admin") -> str:
        """The simple auth manager's generated password (written when the server starts)."""
        return json.loads((self.home / PASSWORD_FILE).read_text())[user]

    def token(self, user: str = "admin") -> str:
        status, body, _ = http(f"{self.ready().base}/auth/token", method="POST",
                               body={"username": user, "password": self.password(user)})
        assert status in (200, 201), (status, body[:500])
        return json.loads(body)["access_token"]

    def stop(self) -> None:
        # The API server runs uvicorn workers as its children: SIGINT to the whole (own) process group.
        try:
            os.killpg(self.process.pid, signal.SIGINT)
            self.process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=_STOP_TIMEOUT_S)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def airflow_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., AirflowUI]]:
    """`start(warehouse, env=None) -> AirflowUI`: an API server whose Variable statekeeper_warehouse is
    `warehouse`; `env` adds variables (e.g. STATEKEEPER_S3_* for an s3:// warehouse)."""
    servers: list[AirflowUI] = []
    logs = []

    def start(warehouse: str, env: dict[str, str] | None = None) -> AirflowUI:
        work = tmp_path_factory.mktemp("airflow-ui")
        home, port = work / "airflow", free_port()
        environ = local_airflow_env(home, api_port=port)
        environ["STATEKEEPER_WAREHOUSE"] = warehouse   # what airflow_settings.yaml puts into the Variable
        environ.update(env or {})
        begun = time.monotonic()
        prepare(home, environ)
        print(f"\nairflow home {home} prepared (db migrate, settings import) in {time.monotonic() - begun:.1f}s")
        log_path = work / "api-server.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed at teardown
        logs.append(log)
        started = time.monotonic()
        proc = subprocess.Popen([airflow_bin(), "api-server"], env=environ, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, umask=PRIVATE_UMASK)
        ui = AirflowUI(home, port, proc, log_path, started)
        servers.append(ui)
        ui.watch()
        return ui

    try:
        yield start
    finally:
        for ui in servers:
            ui.stop()
        for log in logs:
            log.close()


@pytest.fixture(scope="module")
def chromium_driver() -> Iterator[Any]:
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip(f"needs Debian's chromium and chromium-driver (`make setup` installs them); found "
                    f"chromium={chromium}, chromedriver={chromedriver}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    saved = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1200",
                # nothing but the pages under test: no update checks or other background requests
                "--disable-background-networking", "--disable-component-update", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        if saved is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = saved


def open_plugin_page(driver: Any, ui: AirflowUI, route: str = "statekeeper", href: str | None = None,
                     timeout: float = 60) -> Any:
    """Open <base>/plugin/<route> (logging in through the UI's login form if the browser is not
    logged in yet) and switch into the iframe the UI shows the plugin's page in (`href`, relative to
    the base: the external view's href, default "<route>/") once its document has loaded. Returns
    the iframe element (`driver.switch_to.default_content()` leaves it)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    base = ui.ready().base
    src = f"{base}/{href or route + '/'}"
    driver.switch_to.default_content()
    driver.get(f"{base}/plugin/{route}")

    def plugin_frame(d: Any) -> Any:
        # The `src` property is the resolved URL, whatever form the attribute has.
        return next((f for f in d.find_elements(By.TAG_NAME, "iframe") if f.get_property("src") == src), None)

    # Not logged in: the UI sends the browser to /auth/login?next=/plugin/<route>, whose form posts the
    # credentials, sets the `_token` cookie and goes back to `next`.
    wait.until(lambda d: d.find_elements(By.NAME, "username") or plugin_frame(d))
    if driver.find_elements(By.NAME, "username"):
        driver.find_element(By.NAME, "username").send_keys("admin")
        driver.find_element(By.NAME, "password").send_keys(ui.password())
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(EC.url_contains(f"/plugin/{route}"))
    frame = wait.until(plugin_frame, f"no iframe with src {src} on {base}/plugin/{route}")
    wait.until(EC.frame_to_be_available_and_switch_to_it(frame))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete"
               and d.find_elements(By.TAG_NAME, "body"))
    return frame


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where tests leave files for people (screenshots): kept after the run."""
    path = Path(os.environ.get("STATEKEEPER_TEST_ARTIFACTS") or REPO / ".artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(driver: Any, directory: Path, name: str) -> Path:
    """The browser window (the whole UI, whatever frame the driver is in) as `directory/name.png`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    assert driver.get_screenshot_as_file(str(path)), f"screenshot {path} failed"
    print(f"\nscreenshot: {path}")
    return path
