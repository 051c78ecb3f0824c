"""The maintenance pipeline on Google Cloud Storage and Azure (their emulators on loopback), against the
same stores on local disk.

Each store is a real harness store (2.3.0: the restore chain and the failed checkpoints with orphans)
relocated onto the emulator with every `_metadata` rewritten by the codec to the new scheme (Flink's
PyPI package ships no filesystem plugins, so Flink cannot write there itself here), and the same
stores relocated to a local directory. One warehouse per scheme, on local disk.

* index, chains and validation tables equal the local ones, modulo the root prefix;
* a damaged copy (an SST of A that C's newest checkpoint uses deleted, one of C's files truncated) is
  flagged exactly as on local disk;
* GC plans the same files and deletes exactly them (the orphans and failed checkpoint), nothing else;
* a DR copy from the emulator to local disk restores in real Flink with the emulator's originals gone.
"""
from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.storage import RoutingFileIO
from statekeeper.tables import Warehouse
from statekeeper.uri import normalize_uri
from tests.chains.support import oracle_references, relocate_store, store_roots
from tests.index.support import run_index, table_rows
from tests.plugins.object_stores import azure_uri, make_azure_container, make_gcs_bucket

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = "2.3.0" if "2.3.0" in harness.FLINK_VERSIONS else harness.FLINK_VERSIONS[-1]
STORES = ("chain_claim", "failed_and_orphans")
# Columns that name a run or a time, not the store: they differ between any two runs.
VOLATILE = {"index_run_id", "run_id", "mtime", "metadata_mtime", "etag", "metadata_etag", "validated_at",
            "bucket", "root_id", "target_root_id", "snapshot_root_id", "file_root_id"}


def _uri(p) -> str:
    return normalize_uri(str(p))


class Placed:
    """Stores placed under one base (local or on an emulator): intact copies and one damaged copy."""

    def __init__(self, base: str, fileio, fixtures, truth):
        self.base, self.fileio = base, fileio
        self.copies = {name: relocate_store(fx.root, f"{base}/{name}", fileio) for name, fx in fixtures.items()}
        chain = fixtures["chain_claim"]
        self.damaged = relocate_store(chain.root, f"{base}/damaged", fileio)
        old = _uri(chain.root)
        moved = lambda u: self.damaged + u[len(old):]  # noqa: E731
        c_newest = _uri(Path(chain.job("C")["retained_checkpoints"][-1]) / "_metadata")
        users = lambda f: {m for m, files in truth.items() if f in files}  # noqa: E731
        a_shared = _uri(chain.job("A")["job_dir"]) + "/shared/"
        c_shared = _uri(chain.job("C")["job_dir"]) + "/shared/"
        gone = min((f for f in truth[c_newest] if f.startswith(a_shared)), key=lambda f: (len(users(f)), f))
        short = min((f for f in truth[c_newest] if f.startswith(c_shared) and "OPTIONS" not in f),
                    key=lambda f: (len(users(f)), f))
        assert fileio.delete_many([moved(gone)]).ok
        data = fileio.read_bytes(moved(short))
        fileio.write(moved(short), data[: len(data) // 2])
        self.expected: dict[str, set[str]] = {}
        for m in users(gone):
            self.expected.setdefault(moved(m), set()).add("file_exists")
        for m in users(short):
            self.expected.setdefault(moved(m), set()).add("file_size")

    @property
    def roots(self) -> list[str]:
        return [f"{c}/checkpoints" for c in (*self.copies.values(), self.damaged)]


def _pipeline(spark, placed: Placed, warehouse: Warehouse, storage) -> dict:
    from statekeeper.chains.job import ComputeChains
    from statekeeper.validate.job import ValidateCheckpoints
    from statekeeper.validate.options import ValidateOptions

    index = run_index(spark, placed.roots, warehouse, storage=storage)
    assert index.status == "succeeded", index.summary()
    chains = ComputeChains(spark).warehouse(warehouse).storage(storage).progress_interval(0).execute()
    validation = (ValidateCheckpoints(spark).warehouse(warehouse).storage(storage).progress_interval(0)
                  .configure(ValidateOptions(quality_suite=False)).execute())
    tables = {name: table_rows(warehouse, name) for name in
              ("files", "snapshots", "references", "inline_state", "dependencies", "pins", "validation_results",
               "validation_jobs")}
    return {"index": index, "chains": chains, "validation": validation, "tables": tables}


def _canonical(rows: list[dict], base: str) -> list[tuple]:
    """Rows with the store's base replaced by a placeholder and run/time columns dropped, sorted. A
    rewritten `_metadata` spells longer or shorter paths than the local one, so its size differs."""
    def value(v):
        if isinstance(v, str):
            return v.replace(base, "<base>")
        if isinstance(v, list):
            return tuple(sorted((value(x) for x in v), key=repr))
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        return v
    def keep(row: dict, k: str) -> bool:
        if k in VOLATILE or k == "metadata_size":
            return False
        return not (k == "size" and str(row.get("kind", "")).endswith("metadata"))
    return sorted((tuple((k, value(v)) for k, v in sorted(r.items()) if keep(r, k)) for r in rows), key=repr)


@pytest.fixture(scope="module")
def stores(flink_fixture):
    fixtures = {name: flink_fixture(VERSION, name) for name in STORES}
    metadata = [m for fx in fixtures.values() for m in fx.metadata_files()]
    return fixtures, oracle_references(VERSION, metadata)


@pytest.fixture(scope="module")
def local_run(spark, stores, tmp_path_factory):
    fixtures, truth = stores
    base = tmp_path_factory.mktemp("schemes-local")
    placed = Placed(_uri(base / "store"), RoutingFileIO(), fixtures, truth)
    warehouse = Warehouse(str(base / "warehouse"))
    return placed, warehouse, _pipeline(spark, placed, warehouse, None)


# marked by hand: the tiers come from fixture names, and getfixturevalue hides these from them
@pytest.fixture(scope="module", params=[pytest.param("gcs", marks=pytest.mark.gcs),
                                        pytest.param("azure", marks=pytest.mark.azure)])
def remote_run(request, spark, stores, tmp_path_factory):
    fixtures, truth = stores
    if request.param == "gcs":
        config = request.getfixturevalue("gcs_config")
        base = f"gs://{make_gcs_bucket(config, 'pipe')}/store"
    else:
        config = request.getfixturevalue("azure_config")
        base = azure_uri(make_azure_container(config, "pipe"), "store")
    placed = Placed(base, RoutingFileIO(config), fixtures, truth)
    warehouse = Warehouse(str(tmp_path_factory.mktemp(f"schemes-{request.param}") / "warehouse"))
    return request.param, config, placed, warehouse, _pipeline(spark, placed, warehouse, config)


@pytest.mark.parametrize("table", ["files", "snapshots", "references", "inline_state", "dependencies", "pins",
                                   "validation_results", "validation_jobs"])
def test_tables_equal_the_local_store(local_run, remote_run, table):
    local_placed, _, local = local_run
    scheme, _, placed, _, remote = remote_run
    got = _canonical(remote["tables"][table], placed.base)
    want = _canonical(local["tables"][table], local_placed.base)
    assert len(got) == len(want) > 0, (scheme, table)
    assert got == want, (scheme, table)


def test_damage_is_flagged_like_on_local_disk(remote_run):
    scheme, _, placed, _, remote = remote_run
    assert remote["validation"].status == "unrestorable", remote["validation"].summary()
    errors: dict[str, set[str]] = {}
    for r in remote["tables"]["validation_results"]:
        if r["severity"] == "error" and r["check"] != "snapshot":
            errors.setdefault(r["snapshot_uri"], set()).add(r["check"])
    assert errors == placed.expected and placed.expected, scheme


def test_gc_deletes_exactly_the_orphans(spark, remote_run, stores):
    """GC (delete mode) removes exactly what no retained `_metadata` references, by Flink's own reading,
    and every referenced object stays; deletes go through the store's own conditional deletes."""
    from statekeeper.gc.job import CollectGarbage
    from statekeeper.gc.options import GcOptions
    from statekeeper.tables.vocabulary import GcMode

    scheme, config, placed, warehouse, _ = remote_run
    fixtures, truth = stores
    fio = RoutingFileIO(config)
    sources = {**{name: fixtures[name] for name in placed.copies}, "damaged": fixtures["chain_claim"]}
    referenced = set()
    for name, fx in sources.items():
        old, new = _uri(fx.root), placed.copies.get(name, placed.damaged)
        referenced |= {new + f[len(old):] for m, files in truth.items() if m.startswith(old + "/") for f in files}
    before = {i.uri for r in placed.roots for i in fio.list(r)}
    garbage = {u for u in before if u not in referenced and not u.endswith("/_metadata")}
    assert garbage, scheme
    time.sleep(1.5)   # the grace period below is one second
    result = (CollectGarbage(spark).warehouse(warehouse).storage(config)
              .configure(GcOptions(mode=GcMode.DELETE, older_than=timedelta(seconds=1), allow_short_grace=True))
              .progress_interval(0).execute())
    assert result.status == "completed", result.summary()
    after = {i.uri for r in placed.roots for i in fio.list(r)}
    assert before - after == garbage, (scheme, sorted(before - after ^ garbage)[:5])
    assert referenced & before <= after
    assert result.deleted == len(garbage) and result.failed == 0, result.summary()


def test_dr_copy_to_local_disk_restores_with_the_originals_gone(spark, remote_run, stores, tmp_path):
    """The intact chain store's newest checkpoints, copied down from the emulator by the DR job, restore in
    real Flink after the emulator's objects are deleted (Flink could not read them anyway: no plugin)."""
    from statekeeper.replicate.job import CopyToDr
    from statekeeper.replicate.options import DrOptions, SavepointPolicy, TargetSpec, VerifyMode

    scheme, config, placed, warehouse, _ = remote_run
    fixtures, _ = stores
    target = _uri(tmp_path / "dr")
    result = (CopyToDr(spark).warehouse(warehouse).storage(config).progress_interval(0)
              .configure(DrOptions(targets=TargetSpec.parse([target]), allowed_targets=(target,),
                                   savepoints=SavepointPolicy.ALL, verify=VerifyMode.CHECKSUM))
              .target_storage(None).execute())
    # the damaged copy's jobs have no restorable checkpoint left (or fall back): attention, not failure
    assert result.verified > 0, result.summary()
    copies = [r for r in table_rows(warehouse, "dr_copies") if r["run_id"] == result.run_id]
    chain = fixtures["chain_claim"]
    intact = placed.copies["chain_claim"]
    old = _uri(chain.root)
    cases = []
    for job in chain.manifest["jobs"]:
        if not job["retained_checkpoints"]:
            continue
        newest = max(job["retained_checkpoints"], key=lambda d: int(d.rsplit("-", 1)[1]))
        source = intact + _uri(Path(newest) / "_metadata")[len(old):]
        row = next(r for r in copies if r["source_metadata_uri"] == source)
        assert row["status"] == "verified", row
        cases.append((Path(row["target_metadata_uri"][len("file://"):]).parent, "chain_claim", job["name"]))
    # the originals go: nothing on the emulator any more
    fio = RoutingFileIO(config)
    assert fio.delete_many([i.uri for i in fio.list(placed.base)]).ok
    assert not list(fio.list(placed.base))
    readings = harness.run_oracle(VERSION, [p / "_metadata" for p, _, _ in cases])
    for reading in readings:
        assert "error" not in reading, reading
        assert all(_uri(f["path"]).startswith(target + "/") for f in reading["referenced_files"]), scheme
    results = harness.verify_restore_many(VERSION, cases)
    assert [r.ok for r in results] == [True] * len(cases), [r.output[-2000:] for r in results if not r.ok]
