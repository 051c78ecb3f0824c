"""Google Cloud Storage and Azure Blob endpoints for the test session, on loopback.

* GCS: gcp-storage-emulator (PyPI, in requirements.lock), started through tests/plugins/gcs_emulator.py,
  which makes it enforce the generation preconditions it otherwise ignores. Anonymous access.
* Azure: Azurite's Blob service (npm package `azurite`, installed by `make setup` into
  $STATEKEEPER_CACHE/npm/azurite-<version>, outside the repository). Its well-known development account
  `devstoreaccount1` and key; URIs stay production-shaped
  (`abfss://container@devstoreaccount1.dfs.core.windows.net/...`) and the config's azure_blob_endpoint
  sends them to Azurite. Azurite serves Blob only (no DFS endpoint), which is all AzureFileIO uses.

Each server starts lazily, once per session, on a free port, with its data in a temporary directory, and is
stopped by PID at the end. Start-up times are printed once, in the terminal summary. Fixtures give a
StorageConfig per store, a fresh bucket/container per test, and `*_upload_tree` to copy a local store in.
"""
from __future__ import annotations

import os
import re
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from statekeeper.storage import StorageConfig
from tests.plugins.loopback import STARTUP_TIMES, LoopbackServer, free_port

REPO = Path(__file__).resolve().parents[2]
AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's published development key (the same for every installation; not a secret).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
GCS_PROJECT = "statekeeper-test"


def azurite_version() -> str:
    """The pinned version, from the Makefile (its single source)."""
    match = re.search(r"^AZURITE_VERSION\s*:?=\s*(\S+)", (REPO / "Makefile").read_text(), re.MULTILINE)
    if not match:
        raise RuntimeError("Makefile has no AZURITE_VERSION")
    return match.group(1)


def azurite_binary() -> Path:
    cache = Path(os.environ.get("STATEKEEPER_CACHE") or Path.home() / ".cache" / "statekeeper")
    return cache / "npm" / f"azurite-{azurite_version()}" / "node_modules" / ".bin" / "azurite-blob"


class GcsEmulator(LoopbackServer):
    name = "gcp-storage-emulator"

    def __init__(self, data_dir: Path, *, plain: bool = False) -> None:
        """`plain`: the emulator as released, which accepts the generation preconditions and ignores them."""
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        env = dict(os.environ, STORAGE_BASE=str(data_dir), STORAGE_DIR="gcs",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), str(REPO / "include"),
                                                            os.environ.get("PYTHONPATH", "")])))
        module = "gcp_storage_emulator" if plain else "tests.plugins.gcs_emulator"
        super().__init__([sys.executable, "-m", module, "start", "--host", "127.0.0.1",
                          "--port", str(port), "-q"], data_dir / "gcs-emulator.log", cwd=data_dir, env=env)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def config(self, **overrides: object) -> StorageConfig:
        base = StorageConfig(gcs_endpoint=self.endpoint, gcs_anonymous=True, gcs_project=GCS_PROJECT)
        return base.with_overrides(**overrides) if overrides else base


class Azurite(LoopbackServer):
    name = "azurite"

    def __init__(self, data_dir: Path) -> None:
        binary = azurite_binary()
        if not binary.exists():
            raise RuntimeError(f"Azurite is not installed at {binary}: run `make setup` (it installs azurite "
                               f"{azurite_version()} from npm into $STATEKEEPER_CACHE/npm)")
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
        super().__init__([str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
                          str(data_dir), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
                         data_dir / "azurite.log", cwd=data_dir)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # 403 without credentials: the service answers
        except OSError:
            return False

    def config(self, **overrides: object) -> StorageConfig:
        base = StorageConfig(azure_account_name=AZURITE_ACCOUNT, azure_account_key=AZURITE_KEY,
                             azure_blob_endpoint=self.endpoint)
        return base.with_overrides(**overrides) if overrides else base


def azure_uri(container: str, path: str = "") -> str:
    """`abfss://container@devstoreaccount1.dfs.core.windows.net/path` (what Azurite serves)."""
    base = f"abfss://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net"
    return f"{base}/{path.lstrip('/')}" if path else base


# -- GCS fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    server = GcsEmulator(tmp_path_factory.mktemp("gcs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def plain_gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    """gcp-storage-emulator without tests/plugins/gcs_emulator.py's checks: it ignores ifGenerationMatch and
    ifSourceGenerationMatch (a store GC and the DR copy must not trust)."""
    server = GcsEmulator(tmp_path_factory.mktemp("gcs-plain"), plain=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def gcs_config(gcs_emulator: GcsEmulator) -> StorageConfig:
    return gcs_emulator.config()


def make_gcs_bucket(config: StorageConfig, prefix: str = "sk") -> str:
    from statekeeper.storage.gcs import make_gcs_client

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    make_gcs_client(config).create_bucket(name)
    return name


@pytest.fixture
def gcs_bucket(gcs_config: StorageConfig) -> str:
    """A fresh, empty bucket for one test."""
    return make_gcs_bucket(gcs_config)


def gcs_upload(local_dir: str | os.PathLike[str], target_uri: str, config: StorageConfig, *,
               threads: int = 8) -> int:
    """Upload every regular file below `local_dir` to `target_uri` (gs://bucket/prefix), keeping relative
    paths. Returns the number of objects uploaded."""
    from statekeeper.storage.gcs import GcsFileIO

    return _upload(GcsFileIO(config), local_dir, target_uri, threads)


@pytest.fixture(scope="session")
def gcs_upload_tree(gcs_config: StorageConfig):
    """`upload(local_dir, gs_uri) -> count` bound to the session's emulator."""
    def upload(local_dir: str | os.PathLike[str], target_uri: str, *, threads: int = 8) -> int:
        return gcs_upload(local_dir, target_uri, gcs_config, threads=threads)
    return upload


# -- Azure fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    server = Azurite(tmp_path_factory.mktemp("azurite"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azure_config(azurite: Azurite) -> StorageConfig:
    return azurite.config()


def make_azure_container(config: StorageConfig, prefix: str = "sk") -> str:
    from statekeeper.storage.azure import AzureFileIO, AzureLocation

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    loc = AzureLocation(azure_uri(name))
    AzureFileIO(config).service(loc).create_container(name)
    return name


@pytest.fixture
def azure_container(azure_config: StorageConfig) -> str:
    """A fresh, empty container for one test (its URI: `azure_uri(name)`)."""
    return make_azure_container(azure_config)


def azure_upload(local_dir: str | os.PathLike[str], target_uri: str, config: StorageConfig, *,
                 threads: int = 8) -> int:
    """Upload every regular file below `local_dir` to `target_uri` (an abfss:// or wasbs:// prefix)."""
    from statekeeper.storage.azure import AzureFileIO

    return _upload(AzureFileIO(config), local_dir, target_uri, threads)


@pytest.fixture(scope="session")
def azure_upload_tree(azure_config: StorageConfig):
    """`upload(local_dir, abfss_uri) -> count` bound to the session's Azurite."""
    def upload(local_dir: str | os.PathLike[str], target_uri: str, *, threads: int = 8) -> int:
        return azure_upload(local_dir, target_uri, azure_config, threads=threads)
    return upload


def _upload(fileio, local_dir: str | os.PathLike[str], target_uri: str, threads: int) -> int:
    root = Path(local_dir)
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]
    base = target_uri.rstrip("/")

    def put(path: Path) -> None:
        with open(path, "rb") as stream:
            fileio.write(f"{base}/{path.relative_to(root).as_posix()}", stream)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(put, files))
    return len(files)


def pytest_terminal_summary(terminalreporter) -> None:
    if STARTUP_TIMES:
        shown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in sorted(STARTUP_TIMES.items()))
        terminalreporter.write_line(f"object-store servers started: {shown}")
