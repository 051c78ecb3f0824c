"""Edits proven by real Flink restores (the harness verifier restores and checks every invariant).

* Relocation: a checkpoint of job C (chain C ← B ← A, CLAIM) references A's and B's `shared/`.
  We copy exactly the files its `_metadata` references to a new root, rewrite the prefixes, move
  the originals away (so Flink cannot silently read them) and restore from the copy. The originals
  are a relocated copy of the cached store (tests.chains.support.relocate_store), not a store Flink
  generates for the test; since the cache itself stays, Flink's reading of the result must name no
  file outside the new root.
* Externalization: a checkpoint with a 1 MiB inline threshold has its inline state moved out to
  files (relative beside `_metadata`, absolute for SharedList entries) and is restored; removing
  one of the new files makes the restore fail, which proves Flink read the moved state.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statekeeper.format import (
    ByteStreamHandle,
    externalize_inline,
    extract_references,
    read_metadata,
    rewrite_prefixes,
    transform,
    write_metadata,
)
from statekeeper.uri import normalize_uri
from tests.chains.support import relocate_store
from tests.harness import FLINK_VERSIONS, named_paths, run_oracle

pytestmark = [pytest.mark.flink, pytest.mark.slow]


def _local(uri: str) -> Path:
    assert uri.startswith("file:///"), uri
    return Path(uri[len("file://"):])


def _originals(fixture, dest: Path) -> Path:
    """A copy of the cached store at `dest` whose `_metadata` name only paths under `dest`: originals
    that can be moved away without touching the read-only cache (generating a fresh store with Flink
    for it cost ~20 s a version)."""
    relocate_store(fixture.root, str(dest))
    return dest


def _assert_flink_reads_only_under(version: str, metadata: Path, root: Path) -> None:
    """The cache stays in place when the originals are moved away: a path both relocations missed (one
    the codec does not see) would let the restore read the cache and pass anyway. So Flink's own reading
    of the result must name nothing outside `root`. (Not a byte search: inline handles keep their
    would-be file name as a label that Flink never opens.)"""
    [r] = run_oracle(version, [metadata])
    assert "error" not in r, r
    named = named_paths(r)
    assert named, r
    outside = [p for p in named if not Path(p.removeprefix("file:")).resolve().is_relative_to(root.resolve())]
    assert outside == [], outside[:5]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", FLINK_VERSIONS)
def test_relocated_chain_checkpoint_restores(flink_harness, flink_fixture, tmp_path, version):
    fixture = flink_fixture(version, "chain_claim")
    store_root = _originals(fixture, tmp_path / "store")
    c_id = fixture.job("C")["job_id"]
    a_id = fixture.job("A")["job_id"]

    def foreign_jobs(refs):
        jobs = {f.uri.split("/checkpoints/")[1].split("/")[0] for f in refs.files}
        return jobs - {c_id}

    # The newest checkpoint of C that references A's shared/ (through B: C ← B ← A, CLAIM):
    # relocation must carry cross-job references along.
    candidates = []
    for chk in (store_root / c.relative_to(fixture.root) for c in fixture.retained_checkpoints("C")):
        meta = chk / "_metadata"
        model = read_metadata(meta, meta.as_uri())
        refs = extract_references(model, meta.as_uri())
        if a_id in foreign_jobs(refs):
            candidates.append((chk, model, refs))
    assert candidates, "no checkpoint of C references A's shared/ (harness chain_claim scenario)"
    chk, model, refs = candidates[-1]
    meta = chk / "_metadata"

    old_root = normalize_uri(str(store_root))
    new_root_path = tmp_path / "relocated"
    new_root = normalize_uri(str(new_root_path))
    own_dir = refs.snapshot_dir

    # copy exactly what the checkpoint references (plus nothing): data first, _metadata last
    files = refs.physical_files()
    for uri in files:
        assert uri.startswith(old_root + "/"), uri
        target = _local(new_root + uri[len(old_root):])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_local(uri), target)

    result = rewrite_prefixes(model, {old_root: new_root})
    assert result.unmapped == []
    assert result.changes, "an incremental chain checkpoint holds absolute paths"
    new_chk = _local(new_root + own_dir[len(old_root):])
    new_chk.mkdir(parents=True, exist_ok=True)  # may hold no data file: all state under shared/
    new_meta = new_chk / "_metadata"
    with open(new_meta, "wb") as out:
        write_metadata(result.model, out, inline_source=meta)

    # every reference of the rewritten file is under the new root and exists with its size
    new_refs = extract_references(read_metadata(new_meta, new_meta.as_uri()), new_meta.as_uri())
    assert set(new_refs.physical_files()) == {new_root + u[len(old_root):] for u in files}
    for uri, size in new_refs.physical_files().items():
        assert _local(uri).stat().st_size >= size
    _assert_flink_reads_only_under(version, new_meta, new_root_path)

    # move the originals away: a restore that still read them would fail now
    store_root.rename(tmp_path / "originals-moved-away")
    verdict = flink_harness.verify_restore(version, new_chk, "chain_claim", job="C")
    assert verdict.ok, verdict.output[-4000:]


def _inline_handles(model) -> list[ByteStreamHandle]:
    found = []

    def visit(site, role, local_name, node):
        if isinstance(node, ByteStreamHandle) and site.slot != "coordinator":
            found.append(node)
        return node

    transform(model, visit)
    return found


@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", FLINK_VERSIONS)
def test_externalized_inline_checkpoint_restores(flink_harness, flink_fixture, tmp_path, version):
    fixture = flink_fixture(version, "inline_heavy")  # read-only: we only read from it
    chk = fixture.retained_checkpoints("A")[-1]
    meta = chk / "_metadata"
    model = read_metadata(meta, meta.as_uri())
    assert len(_inline_handles(model)) > 10, "job A runs with a 1 MiB inline threshold"

    new_chk = tmp_path / "job" / chk.name
    new_chk.mkdir(parents=True)
    new_meta = new_chk / "_metadata"
    refs = extract_references(model, meta.as_uri())
    # the checkpoint's own (relative) files move with it; absolute ones stay where they are
    for f in refs.files:
        if f.handle_kind == "RELATIVE_STREAM_STATE_HANDLE":
            shutil.copy2(_local(f.uri), new_chk / f.stored_path)

    result = externalize_inline(model, new_meta.as_uri())
    assert result.files and not _inline_handles(result.model)
    assert any(f.absolute for f in result.files), "SharedList entries become absolute handles"
    assert any(not f.absolute for f in result.files)
    with open(meta, "rb") as src:
        for f in result.files:
            with open(_local(f.uri), "wb") as out:
                for chunk in f.payload.iter_chunks(src):
                    out.write(chunk)
    with open(new_meta, "wb") as out:
        written = write_metadata(result.model, out, inline_source=meta)
    assert written < meta.stat().st_size - result.externalized_bytes + 200 * len(result.files)

    cases = [(new_chk, "inline_heavy", "A")]
    if version == FLINK_VERSIONS[-1]:
        # negative control: without one externalized private file the restore must fail. It runs on
        # a copy of the checkpoint dir (relative files resolve beside its _metadata, the absolute
        # SharedList files stay shared), so both restores share one JVM.
        victim = max((f for f in result.files if not f.absolute), key=lambda f: f.payload.length)
        missing = tmp_path / "missing" / chk.name
        shutil.copytree(new_chk, missing)
        (missing / _local(victim.uri).relative_to(new_chk)).unlink()
        cases.append((missing, "inline_heavy", "A"))
    verdict, *control = flink_harness.verify_restore_many(version, cases)
    assert verdict.ok, verdict.output[-4000:]
    if control:
        assert not control[0].ok, "restore succeeded without a file the rewritten _metadata references"


@pytest.mark.timeout(900)
def test_relocated_file_merging_checkpoint_restores(flink_harness, flink_fixture, tmp_path):
    # Segments (tag 15) and managed directories (tag 17) are absolute: a relocation that missed
    # one would read the originals (moved away below) or, under CLAIM, delete source directories.
    version = FLINK_VERSIONS[-1]
    fixture = flink_fixture(version, "file_merging")
    store_root = _originals(fixture, tmp_path / "store")
    chk = store_root / fixture.retained_checkpoints()[-1].relative_to(fixture.root)
    meta = chk / "_metadata"
    model = read_metadata(meta, meta.as_uri())
    refs = extract_references(model, meta.as_uri())
    segments = [f for f in refs.files if f.handle_kind == "SEGMENT_FILE_HANDLE"]
    assert segments and refs.managed_dirs(), "file merging writes segments and managed directories"

    old_root = normalize_uri(str(store_root))
    new_root = normalize_uri(str(tmp_path / "relocated"))
    for uri in refs.physical_files():
        target = _local(new_root + uri[len(old_root):])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_local(uri), target)
    for d in refs.managed_dirs():
        _local(new_root + d[len(old_root):]).mkdir(parents=True, exist_ok=True)

    result = rewrite_prefixes(model, {old_root: new_root})
    assert result.unmapped == []
    kinds = {c.handle_kind for c in result.changes}
    assert {"SEGMENT_FILE_HANDLE", "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE"} <= kinds
    new_chk = _local(new_root + refs.snapshot_dir[len(old_root):])
    new_chk.mkdir(parents=True, exist_ok=True)
    with open(new_chk / "_metadata", "wb") as out:
        write_metadata(result.model, out, inline_source=meta)
    new_refs = extract_references(read_metadata(new_chk / "_metadata", (new_chk / "_metadata").as_uri()),
                                  (new_chk / "_metadata").as_uri())
    assert all(f.uri.startswith(new_root + "/") for f in new_refs.files)
    _assert_flink_reads_only_under(version, new_chk / "_metadata", tmp_path / "relocated")

    store_root.rename(tmp_path / "originals-moved-away")
    verdict = flink_harness.verify_restore(version, new_chk, "file_merging")
    assert verdict.ok, verdict.output[-4000:]
