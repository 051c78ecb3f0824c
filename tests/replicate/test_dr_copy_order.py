"""The DR copy's tasks learn what an S3 target holds from listing pages, not from a HEAD per object.

The copy and verify steps hand their tasks the rows in target key order (`in_target_order`: contiguous key
ranges, sorted), so a task's listing pages of a target directory are dense in the keys it asks for. Spread by
a hash of the key, every task held a thin slice of every directory, and the lookup read most targets one by one
(0.39 requests per object on a complete target in `bench dr_copy`). Here two target directories larger than a
listing page (the page is made small so that the store stays small) are copied once, then copied again into
the complete target: the second pass must skip every object on listing pages alone. The requests are counted by
the fault proxy in front of the session's SeaweedFS (no faults), for the target bucket only.
"""
from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from statekeeper.replicate.tasks import COPY_OUT_SPARK, CopyTask, in_target_order
from statekeeper.storage import RoutingFileIO
from statekeeper.storage.s3 import make_s3_client
from tests.plugins.s3 import make_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]

DIRS = 2
PER_DIR = 400      # 4 listing pages of PAGE keys per directory
PAGE = 100
PARTS = 8          # as the job at local[2]: 4 x cores


def _copy(spark, plan, config, source_root: str, target_root: str) -> dict[str, int]:
    from pyspark.sql import functions as F

    task = CopyTask(config, None, [source_root], [target_root], 16, False)
    rows = (in_target_order(plan, PARTS).mapInArrow(task, COPY_OUT_SPARK)
            .groupBy("outcome").agg(F.count(F.lit(1)).alias("n")).collect())
    return {r["outcome"]: int(r["n"]) for r in rows}


def test_a_complete_target_is_learnt_from_listing_pages(spark, slow_s3):
    config = slow_s3.config.with_overrides(list_page_size=PAGE)
    src, dst = make_bucket(config, "order-src"), make_bucket(config, "order-dst")
    client = make_s3_client(config.with_overrides(max_pool_connections=16))
    keys = [f"flink/job-{d}/shared/{uuid.uuid4()}.sst" for d in range(DIRS) for _ in range(PER_DIR)]

    def put(key: str) -> None:
        client.put_object(Bucket=src, Key=key, Body=key.encode() * 3)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(put, keys))
    source_root, target_root = f"s3://{src}/flink", f"s3://{dst}/flink"
    # size and version as the index records them: from the source's listing
    plan = spark.createDataFrame(
        [(i.uri, target_root + i.uri[len(source_root):], i.size, i.etag)
         for i in RoutingFileIO(config).list(source_root)],
        "source_uri string, target_uri string, expected_size long, expected_version string")
    assert plan.count() == len(keys)

    assert _copy(spark, plan, config, source_root, target_root) == {"copied": len(keys)}
    before = Counter(slow_s3.forwarded_to[dst])
    assert _copy(spark, plan, config, source_root, target_root) == {"skipped": len(keys)}

    requests = Counter(slow_s3.forwarded_to[dst]) - before
    # Each task's range spans at most the directories it touches; a page holds PAGE keys. Contiguous ranges
    # need about DIRS * PER_DIR / PAGE pages plus one per task boundary; a HEAD is taken only where a task
    # holds a single key of a directory.
    assert set(requests) <= {"list", "head"}, requests
    assert requests["list"] <= DIRS * PER_DIR // PAGE + 2 * PARTS, requests
    assert requests["head"] <= PARTS, requests
