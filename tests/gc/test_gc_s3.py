"""GC on moto S3, through an endpoint that answers a share of requests with 503 SlowDown.

A relocated copy of the 2.3.0 `failed_and_orphans` store on moto is indexed and chained directly;
GC then plans and deletes through the fault-injecting proxy (every 2nd DeleteObjects, LIST and HEAD
request answered 503 SlowDown). It must complete through retries, report them,
delete exactly the garbage the oracle says nothing references, and leave every referenced object.
"""
from __future__ import annotations

from datetime import timedelta

import pytest

import tests.harness as harness
from statekeeper.chains.job import ComputeChains
from statekeeper.gc.job import CollectGarbage
from statekeeper.gc.options import GcOptions
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.tables.vocabulary import GcMode
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references, relocate_store, store_roots
from tests.index.support import run_index
from tests.plugins.s3 import make_bucket

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]


def s3_listing(fio, roots: list[str]) -> dict[str, int]:
    return {i.uri: i.size for r in roots for i in fio.list(r)}


def test_gc_on_s3_through_slowdown(spark, flink_fixture, s3_config, slow_s3):
    fx = flink_fixture(VERSION, "failed_and_orphans")
    bucket = make_bucket(s3_config, "gc")
    fio = RoutingFileIO(s3_config)
    copy = relocate_store(fx.root, f"s3://{bucket}/store", fio)
    roots = store_roots(copy)
    truth = oracle_references(VERSION, fx.metadata_files())
    base = normalize_uri(str(fx.root))
    referenced = {copy + f[len(base):] for files in truth.values() for f in files}
    warehouse = Warehouse(f"s3://{bucket}/warehouse", s3_config)
    index = run_index(spark, roots, warehouse, storage=s3_config, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    ComputeChains(spark).warehouse(warehouse).storage(s3_config).execute()
    before = s3_listing(fio, roots)
    garbage = {u for u in before if u not in referenced and not u.endswith("/_metadata")}
    assert garbage

    # every 2nd DeleteObjects, LIST and HEAD request: the re-list, the re-check and the deletes all meet 503s
    slow_s3.set_faults(every=2, kinds={"delete", "list", "head"})
    # The tables go straight to moto; the checkpoint storage (re-list, re-check, delete) through the proxy.
    result = (CollectGarbage(spark).warehouse(warehouse).storage(slow_s3.config)
              .configure(GcOptions(mode=GcMode.DELETE, older_than=timedelta(seconds=1), allow_short_grace=True))
              .progress_interval(0).execute())
    assert result.status == "completed", result.summary()
    assert slow_s3.injected > 0 and result.retries > 0, (slow_s3.injected, result.retries)
    after = s3_listing(fio, roots)
    assert set(before) - set(after) == garbage
    assert referenced & set(before) <= set(after)
    assert result.deleted == len(garbage) and result.failed == 0
