"""GC on S3 (the session's SeaweedFS), through an endpoint that answers a share of requests with 503 SlowDown.

A relocated copy of the 2.3.0 `failed_and_orphans` store on it is indexed and chained directly;
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
    # The tables go straight to the server; the checkpoint storage (re-list, re-check, delete) through the proxy.
    result = (CollectGarbage(spark).warehouse(warehouse).storage(slow_s3.config)
              .configure(GcOptions(mode=GcMode.DELETE, older_than=timedelta(seconds=1), allow_short_grace=True))
              .progress_interval(0).execute())
    assert result.status == "completed", result.summary()
    assert slow_s3.injected > 0 and result.retries > 0, (slow_s3.injected, result.retries)
    after = s3_listing(fio, roots)
    assert set(before) - set(after) == garbage
    assert referenced & set(before) <= set(after)
    assert result.deleted == len(garbage) and result.failed == 0


@pytest.mark.parametrize("server", ["plain_moto_server", "seaweedfs"])
def test_gc_execute_keeps_an_object_rewritten_after_the_plan_whatever_the_store_enforces(server, spark, flink_fixture,
                                                                                      tmp_path, request):
    """A reviewed plan executed after one planned object was rewritten (same key, same size, other bytes). Moto as
    released accepts DeleteObjects' per-key ETag and ignores it: the self-test finds that out, the deletes re-check
    by listing, and the run records `listing` for that store. SeaweedFS enforces it: the self-test proves it, the
    deletes carry the planned ETags with no listing first, and the server itself refuses the rewritten object.
    Either way it is kept (changed_skipped), every other planned object is deleted, every referenced one stays."""
    from tests.gc.support import actions, runs

    fx = flink_fixture(VERSION, "failed_and_orphans")
    config = request.getfixturevalue(server).config()
    bucket = make_bucket(config, "gc")
    fio = RoutingFileIO(config)
    copy = relocate_store(fx.root, f"s3://{bucket}/store", fio)
    roots = store_roots(copy)
    truth = oracle_references(VERSION, fx.metadata_files())
    base = normalize_uri(str(fx.root))
    referenced = {copy + f[len(base):] for files in truth.values() for f in files}
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    index = run_index(spark, roots, warehouse, storage=config, allow_empty_root=True)
    assert index.status == "succeeded", index.summary()
    ComputeChains(spark).warehouse(warehouse).storage(config).progress_interval(0).execute()

    def gc(**options):
        return (CollectGarbage(spark).warehouse(warehouse).storage(config).progress_interval(0)
                .configure(GcOptions(older_than=timedelta(seconds=1), allow_short_grace=True, **options)).execute())

    plan = gc()
    assert plan.status == "planned" and plan.planned >= 2, plan.summary()
    planned = {r["uri"] for r in actions(warehouse, plan.run_id)}
    victim = sorted(u for u in planned if not u.endswith("/_metadata"))[0]
    original = fio.read_bytes(victim)
    rewritten = bytes(b ^ 0x5A for b in original) if original else b"x"
    fio.write(victim, rewritten)
    assert len(rewritten) == len(original) or not original

    result = gc(mode=GcMode.EXECUTE, plan_run_id=plan.run_id)
    assert result.status == "completed", result.summary()
    outcomes = {r["uri"]: r for r in actions(warehouse, plan.run_id)}
    assert outcomes[victim]["outcome"] == "changed_skipped", outcomes[victim]
    assert fio.read_bytes(victim) == rewritten
    assert {u: r["outcome"] for u, r in outcomes.items() if u != victim} == {u: "deleted" for u in planned - {victim}}
    remaining = set(s3_listing(fio, roots))
    assert referenced <= remaining and remaining & planned == {victim}

    expected = {"plain_moto_server": ("ignored", "listing"), "seaweedfs": ("enforced", "precondition")}[server]
    store = f"s3://{bucket} at {config.endpoint}"
    [row] = [r for r in runs(warehouse) if r["run_id"] == result.run_id]
    assert [(p["store"], p["guard"], p["verdict"], p["protection"]) for p in row["protection"]] == [
        (store, "conditional_delete", *expected)]
    assert f"protection: {store}: the per-key ETag of DeleteObjects: {expected[1]} ({expected[0]})" in result.summary()
    message = outcomes[victim]["message"]
    if server == "seaweedfs":   # the server's own refusal (412), no listing re-check
        assert "the store refused the delete conditional on the planned version" in message, message
    else:                       # caught by the listing re-check before the (unconditional) delete
        assert "changed since it was planned (etag" in message, message
    # No scratch object of the self-test is left below the roots.
    assert not [u for u in remaining if "/_statekeeper_probe/" in u]
