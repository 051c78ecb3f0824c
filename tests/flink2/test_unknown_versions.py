"""Metadata versions Statekeeper does not read (FLIP-600's V7, and beyond) are refused by name, by every step.

A checkout of the prepared `incremental` store of the newest harness version: its newest retained checkpoint
gets a V7 header in front of its real V6 body (a half-read would find nothing wrong), an older one a V8
header. Then each step's fail-closed outcome:

* `statekeeper inspect`: exit 3, naming the version and FLIP-600;
* the index: a `snapshots` row with status `unsupported` and the codec's message (not a skipped file);
* validation: the job's newest checkpoint does not restore (exit 1), the latest restorable is older;
* GC: blocked (exit 1) naming both files, nothing deleted;
* DR copy and compaction of either, by `--snapshot`: refused (exit 2) naming the version, nothing written.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tests.harness as harness
from tests.compact.support import CompactPipeline
from tests.gc.support import SHORT, listing, uri
from tests.plugins.prepared import replace_bytes
from tests.replicate.support import table

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

VERSION = harness.FLINK_VERSIONS[-1]
REPO = Path(__file__).resolve().parents[2]


def _with_version(metadata: Path, version: int) -> None:
    data = bytearray(metadata.read_bytes())
    assert int.from_bytes(data[4:8], "big") == harness.metadata_version_for(VERSION)
    data[4:8] = version.to_bytes(4, "big")
    replace_bytes(metadata, bytes(data))


@pytest.fixture(scope="module")
def store(prepared_store, tmp_path_factory):
    base = tmp_path_factory.mktemp("unknown-versions")
    co = prepared_store("incremental", VERSION).checkout(base, __name__)
    chks = sorted(co.store.glob("checkpoints/*/chk-*"), key=lambda d: int(d.name[4:]))
    v7, v8 = chks[-1] / "_metadata", chks[0] / "_metadata"
    _with_version(v7, 7)
    _with_version(v8, 8)
    p = co.pipeline
    p = CompactPipeline(p.spark, p.warehouse, p.roots, p.base)
    p.refresh()
    return {"p": p, "v7": v7, "v8": v8, "older": chks[-2], "base": base}


def test_each_step_refuses_by_name(store, caplog):
    p, v7, v8 = store["p"], store["v7"], store["v8"]
    # inspect
    res = subprocess.run([sys.executable, "-m", "statekeeper.cli", "inspect", str(v7)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 3 and "unsupported metadata version 7" in res.stderr and "FLIP-600" in res.stderr

    # the index: one row each, status unsupported, the codec's message
    rows = {r["uri"]: r for r in table(p.warehouse, "snapshots")}
    for path, version in ((v7, 7), (v8, 8)):
        row = rows[uri(path)]
        assert row["status"] == "unsupported" and f"unsupported metadata version {version}" in row["error"], row
        assert "Upgrade Statekeeper" in row["error"]
    assert "FLIP-600" in rows[uri(v7)]["error"]

    # validation: the newest checkpoint does not restore; the latest restorable is an older one
    assert p.validate() == 1
    jobs = table(p.warehouse, "validation_jobs")
    job = next(j for j in jobs if j["kind"] == "job")
    assert job["newest_uri"] == uri(v7) and not job["newest_restorable"]
    assert job["latest_restorable_uri"] == uri(store["older"] / "_metadata")

    # GC: blocked, naming both files; nothing deleted
    before = listing(p.roots)
    code, result = p.gc("--mode", "delete", "--retain-last", "1", *SHORT)
    blocked = " ".join(result.get("blocked", ()))
    assert code == 1 and result["status"] == "blocked" and result["deleted"] == 0
    assert "snapshot_not_ok" in blocked and uri(v7) in blocked and uri(v8) in blocked
    assert "unsupported metadata version 7" in blocked
    assert listing(p.roots) == before

    # DR copy and compaction by --snapshot: refused before anything is written
    target = uri(store["base"] / "dr")
    # (the entry point reports a refused request through logging, before any Spark work)
    for path, version in ((v7, 7), (v8, 8)):
        for step, run in (("dr", lambda d: p.dr("--snapshot", d, "--target", target, "--allowed-targets", target)),
                          ("compact", lambda d: p.compact("--snapshot", d))):
            caplog.clear()
            code, _ = run(uri(path.parent))
            refused = [r.getMessage() for r in caplog.records if "configuration error" in r.getMessage()]
            assert code == 2 and len(refused) == 1, (step, code, caplog.text[-2000:])
            assert uri(path) in refused[0] and f"unsupported metadata version {version}" in refused[0], refused
    assert not (store["base"] / "dr").exists() or not any((store["base"] / "dr").rglob("*"))
    assert listing(p.roots) == before
