"""The test session's general S3 endpoint and its helpers: `s3_config` is the session's SeaweedFS
(tests/plugins/seaweedfs.py), a real S3 server that enforces the preconditions Statekeeper relies on (DeleteObjects'
per-key ETag, CopySourceIfMatch, If-None-Match) itself, with no layer of ours in front. Tests get a `StorageConfig`
pointing at it (`s3_config`), fresh buckets (`s3_bucket`, `make_bucket`), `upload_tree` to copy a local directory
tree (e.g. a harness fixture store) into a bucket with a few client threads, and `s3_env`, the variables a job
process reads its S3 settings from.

`plain_moto_server` is moto as released, kept where moto serves the subject better (tests/README.md): an
S3-compatible store that accepts the preconditions and ignores them (statekeeper.storage.enforcement must find out,
and GC and the DR copy must not trust it), and a store that holds keys a file system cannot (`a//b` beside `a/b`;
SeaweedFS folds them). One server of each kind per pytest session (of the xdist worker), started lazily by the first
test that needs it, killed by PID at the end.
"""
from __future__ import annotations

import os
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from statekeeper.storage import StorageConfig
from tests.plugins.loopback import LoopbackServer, free_port

if TYPE_CHECKING:   # imported in the functions: pytest must register that plugin before anything imports it
    from tests.plugins.seaweedfs import SeaweedFS

_REPO = Path(__file__).resolve().parents[2]
MOTO_ACCESS_KEY = "statekeeper-test"
MOTO_SECRET_KEY = "statekeeper-test-secret"


class MotoServer(LoopbackServer):
    """moto's own S3 server (`python -m moto.server`), as released: it accepts the per-key ETag of DeleteObjects,
    CopySourceIfMatch and If-None-Match on CopyObject and ignores them (it honours If-None-Match on PutObject and
    If-Match on GetObject, HeadObject and DeleteObject). Its access log, one line per request, is `log_path`."""

    name = "moto_server"
    start_timeout_s = 30.0

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        argv, env = self._argv_env()
        super().__init__(argv, log_path, env=env, cwd=_REPO)

    def _argv_env(self) -> tuple[list[str], dict[str, str]]:
        """The server's command line and environment (bench/_moto.py starts its own launcher with the same)."""
        env = dict(os.environ, AWS_ACCESS_KEY_ID=MOTO_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=MOTO_SECRET_KEY,
                   AWS_DEFAULT_REGION="us-east-1")
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)], env

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def config(self, **overrides: object) -> StorageConfig:
        base = StorageConfig(endpoint=self.endpoint, region="us-east-1", access_key_id=MOTO_ACCESS_KEY,
                             secret_access_key=MOTO_SECRET_KEY, path_style=True)
        return base.with_overrides(**overrides) if overrides else base


@pytest.fixture(scope="session")
def plain_moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto as released: the S3-compatible store that accepts the per-key ETag of DeleteObjects, CopySourceIfMatch
    and If-None-Match on CopyObject and ignores them (a store GC and the DR copy must not trust); it also holds every
    key AWS S3 holds."""
    server = MotoServer(tmp_path_factory.mktemp("moto-plain") / "moto_server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_config(seaweedfs: SeaweedFS) -> StorageConfig:
    """The session's SeaweedFS (tests/plugins/seaweedfs.py): path-style, its test keys."""
    return seaweedfs.config()


def s3_env(config: StorageConfig) -> dict[str, str]:
    """The variables a job process started by a test reads its S3 settings from (the entry points'
    documented names): the endpoint and credentials of `config`, path-style addressing."""
    return {"STATEKEEPER_S3_ENDPOINT": config.endpoint, "AWS_ACCESS_KEY_ID": config.access_key_id,
            "AWS_SECRET_ACCESS_KEY": config.secret_access_key, "AWS_REGION": config.region,
            "STATEKEEPER_S3_PATH_STYLE": "true"}


def make_bucket(config: StorageConfig, prefix: str = "sk") -> str:
    """A fresh bucket on the endpoint of `config`, named `<prefix>-<12 hex>` (`prefix` in lower case: S3's
    bucket naming rules)."""
    from statekeeper.storage.s3 import make_s3_client

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    make_s3_client(config).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_bucket(s3_config: StorageConfig) -> str:
    """A fresh, empty bucket for one test."""
    return make_bucket(s3_config)


def upload_tree(local_dir: str | os.PathLike[str], target_uri: str, config: StorageConfig,
                *, threads: int = 8) -> int:
    """Upload every regular file below `local_dir` to `target_uri` (s3://bucket/prefix), keeping
    relative paths. Returns the number of objects uploaded."""
    from statekeeper.storage.s3 import make_s3_client, split_s3_uri

    bucket, prefix = split_s3_uri(target_uri)
    root = Path(local_dir)
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]
    client = make_s3_client(config.with_overrides(max_pool_connections=max(threads, 10)))

    def put(path: Path) -> None:
        key = "/".join(x for x in (prefix, path.relative_to(root).as_posix()) if x)
        client.upload_file(str(path), bucket, key)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(put, files))
    return len(files)


@pytest.fixture(scope="session")
def s3_upload_tree(s3_config: StorageConfig):
    """`upload(local_dir, s3_uri) -> count` bound to the session's S3 endpoint (`s3_config`)."""
    def upload(local_dir: str | os.PathLike[str], target_uri: str, *, threads: int = 8) -> int:
        return upload_tree(local_dir, target_uri, s3_config, threads=threads)
    return upload
