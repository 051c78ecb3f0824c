"""Stores written by real Flink straight into the session's SeaweedFS (tests/harness/s3_store.py).

`flink_s3_store(scenario)` generates `scenario` with the newest harness Flink into a bucket of the session's
SeaweedFS the first time a test asks for it (10-30 s) and hands the same store to every later test of the session
(of the xdist worker): SeaweedFS's data does not outlive the session, so there is no cache to share across
sessions. READ-ONLY: a test that deletes or rewrites objects works on a copy (statekeeper's own copy, e.g. a DR
copy), never on the shared store.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

import tests.harness as harness
from statekeeper.storage import RoutingFileIO
from tests.harness.s3_store import S3Store, generate_s3_store

if TYPE_CHECKING:   # imported in the functions: pytest must register those plugins before anything imports them
    from tests.plugins.seaweedfs import SeaweedFS


def flink_s3_endpoint(server: SeaweedFS) -> harness.S3Endpoint:
    """The endpoint and keys a harness JVM uses to read and write `server` (its environment, never argv)."""
    from tests.plugins.seaweedfs import ACCESS_KEY, SECRET_KEY

    return harness.S3Endpoint(server.endpoint, ACCESS_KEY, SECRET_KEY)


@pytest.fixture(scope="session")
def flink_s3_store(seaweedfs: SeaweedFS) -> Callable[[str], S3Store]:
    from tests.plugins.s3 import make_bucket

    stores: dict[str, S3Store] = {}
    bucket = make_bucket(seaweedfs.config(), "flink")
    fio = RoutingFileIO(seaweedfs.config())

    def get(scenario: str) -> S3Store:
        if scenario not in stores:
            stores[scenario] = generate_s3_store(harness.FLINK_VERSIONS[-1], scenario,
                                                 f"s3://{bucket}/{scenario}", flink_s3_endpoint(seaweedfs), fio)
        return stores[scenario]

    return get
