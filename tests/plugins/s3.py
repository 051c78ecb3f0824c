"""A real S3 endpoint for the test session: `moto_server` on loopback, with the preconditions S3 enforces and
moto ignores enforced (tests/plugins/s3_server.py: the per-key ETag of DeleteObjects, CopySourceIfMatch,
If-None-Match on CopyObject). `plain_moto_server` is moto as released, without that layer: the S3-compatible
store that accepts those preconditions and ignores them (statekeeper.storage.enforcement must find out).

One server per pytest session (started lazily by the first test that needs it), killed by PID at the
end. Tests get a `StorageConfig` pointing at it and fresh buckets; `upload_tree` copies a local
directory tree (e.g. a harness fixture store) into a bucket with a few client threads (moto does
~220 puts/s, so keep uploaded stores modest).
"""
from __future__ import annotations

import os
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from statekeeper.storage import StorageConfig
from tests.plugins.loopback import LoopbackServer, free_port

_REPO = Path(__file__).resolve().parents[2]
MOTO_ACCESS_KEY = "statekeeper-test"
MOTO_SECRET_KEY = "statekeeper-test-secret"


class MotoServer(LoopbackServer):
    name = "moto_server"
    start_timeout_s = 30.0

    def __init__(self, log_path: Path, *, seed: bool = False, plain: bool = False) -> None:
        """`seed`: benchmarks' fast set-up (tests/plugins/s3_server.py, `seed_objects`); never in tests. `plain`:
        moto's own server, without tests/plugins/s3_server.py's preconditions."""
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, AWS_ACCESS_KEY_ID=MOTO_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=MOTO_SECRET_KEY,
                   AWS_DEFAULT_REGION="us-east-1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH", "")])),
                   STATEKEEPER_MOTO_SEED="1" if seed else "0")
        module = "moto.server" if plain else "tests.plugins.s3_server"
        super().__init__([sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(self.port)],
                         log_path, env=env, cwd=_REPO)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def seed_objects(self, bucket: str, objects: list[tuple[str, int]]) -> None:
        """Create objects of these keys and sizes inside the server (a server started with `seed=True`)."""
        import json

        for start in range(0, len(objects), 20_000):
            body = json.dumps({"bucket": bucket, "objects": objects[start:start + 20_000]}).encode()
            request = urllib.request.Request(f"{self.endpoint}/_statekeeper/seed", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"seeding {bucket} failed: {resp.status}")

    def config(self, **overrides: object) -> StorageConfig:
        base = StorageConfig(endpoint=self.endpoint, region="us-east-1", access_key_id=MOTO_ACCESS_KEY,
                             secret_access_key=MOTO_SECRET_KEY, path_style=True)
        return base.with_overrides(**overrides) if overrides else base


def _served(tmp_path_factory: pytest.TempPathFactory, name: str, *, plain: bool = False) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp(name) / "moto_server.log", plain=plain)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    yield from _served(tmp_path_factory, "moto")


@pytest.fixture(scope="session")
def second_moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """Another S3 endpoint with other data (a DR region's): copies to it stream, never server-side."""
    yield from _served(tmp_path_factory, "moto-second")


@pytest.fixture(scope="session")
def plain_moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto as released: it accepts the per-key ETag of DeleteObjects, CopySourceIfMatch and If-None-Match on
    CopyObject and ignores them (a store GC and the DR copy must not trust)."""
    yield from _served(tmp_path_factory, "moto-plain", plain=True)


@pytest.fixture(scope="session")
def s3_config(moto_server: MotoServer) -> StorageConfig:
    return moto_server.config()


def s3_env(config: StorageConfig) -> dict[str, str]:
    """The variables a job process started by a test reads its S3 settings from (the entry points'
    documented names): the moto server's endpoint and credentials, path-style addressing."""
    return {"STATEKEEPER_S3_ENDPOINT": config.endpoint, "AWS_ACCESS_KEY_ID": config.access_key_id,
            "AWS_SECRET_ACCESS_KEY": config.secret_access_key, "AWS_REGION": config.region,
            "STATEKEEPER_S3_PATH_STYLE": "true"}


def make_bucket(config: StorageConfig, prefix: str = "sk") -> str:
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
    """`upload(local_dir, s3_uri) -> count` bound to the session's moto server."""
    def upload(local_dir: str | os.PathLike[str], target_uri: str, *, threads: int = 8) -> int:
        return upload_tree(local_dir, target_uri, s3_config, threads=threads)
    return upload
