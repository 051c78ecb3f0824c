"""DR copy pieces without Spark: options (targets, allowlist, overlap), the relocation of a real
`_metadata`, and the entry point's refusals before anything starts."""
from __future__ import annotations

import io

import pytest

from statekeeper.format import extract_references, open_metadata, read_metadata
from statekeeper.launch.entrypoint import snapshots_from
from statekeeper.replicate.options import DrMode, DrOptions, DrOptionsError, TargetSpec, parse_allowed
from statekeeper.replicate.relocate import RelocateError, external_target, relocate, target_of
from statekeeper.uri import normalize_uri

ROOTS = ["s3://src/flink/checkpoints", "s3://src/flink/savepoints"]


def _opts(*targets: str, allowed: str = "s3://dr", mode: DrMode = DrMode.COPY) -> DrOptions:
    return DrOptions(targets=TargetSpec.parse(list(targets)), allowed_targets=parse_allowed([allowed]), mode=mode)


# Follow mode goes through the same allowlist and overlap rules as the nightly copy (CopyToDr._prepare).
MODES = pytest.mark.parametrize("mode", [DrMode.COPY, DrMode.FOLLOW])


def test_a_base_mirrors_each_root_by_its_last_segment():
    assert _opts("s3://dr/flink").mapping(ROOTS) == {
        "s3://src/flink/checkpoints": "s3://dr/flink/checkpoints", "s3://src/flink/savepoints": "s3://dr/flink/savepoints"}


def test_a_base_keeps_roots_apart_below_their_common_directory():
    roots = ["file:///c/fx/chain-1/checkpoints", "file:///c/fx/chain-1/savepoints", "file:///c/fx/orph-2/checkpoints"]
    assert _opts("file:///dr", allowed="file:///dr").mapping(roots) == {
        "file:///c/fx/chain-1/checkpoints": "file:///dr/chain-1/checkpoints",
        "file:///c/fx/chain-1/savepoints": "file:///dr/chain-1/savepoints",
        "file:///c/fx/orph-2/checkpoints": "file:///dr/orph-2/checkpoints"}
    assert _opts("s3://dr/x").mapping(["s3://a/flink", "s3://b/flink"]) == {
        "s3://a/flink": "s3://dr/x/a/flink", "s3://b/flink": "s3://dr/x/b/flink"}
    assert _opts("s3://dr/x").mapping(["s3://a/flink/checkpoints"]) == {
        "s3://a/flink/checkpoints": "s3://dr/x/checkpoints"}


def test_pairs_win_over_the_base_and_must_name_indexed_roots():
    m = _opts("s3://dr/base", "s3://src/flink/savepoints=s3://dr/sp").mapping(ROOTS)
    assert m["s3://src/flink/savepoints"] == "s3://dr/sp" and m["s3://src/flink/checkpoints"] == "s3://dr/base/checkpoints"
    with pytest.raises(DrOptionsError, match="does not cover"):
        _opts("s3://other/x=s3://dr/x").mapping(ROOTS)
    with pytest.raises(DrOptionsError, match="has no target"):
        _opts("s3://src/flink/checkpoints=s3://dr/c").mapping(ROOTS)


@MODES
@pytest.mark.parametrize("target, message", [
    ("s3://elsewhere/flink", "not below any allowed"),
    ("s3://drx/flink", "not below any allowed"),              # a prefix of the name is not a parent
])
def test_targets_outside_the_allowlist_are_refused(target, message, mode):
    with pytest.raises(DrOptionsError, match=message):
        _opts(target, mode=mode).check()


@pytest.mark.parametrize("targets", [
    ("s3://src/flink/checkpoints=s3://src/flink/checkpoints/dr", "s3://src/flink/savepoints=s3://src/sp-dr"),
    ("s3://src/flink/checkpoints=s3://src/flink", "s3://src/flink/savepoints=s3://src/sp-dr"),
])
@MODES
def test_a_target_overlapping_a_source_root_is_refused(targets, mode):
    with pytest.raises(DrOptionsError, match="overlaps the source root"):
        _opts(*targets, allowed="s3://src", mode=mode).mapping(ROOTS)


@MODES
def test_two_roots_never_share_a_target_and_nothing_runs_without_allowlist_or_target(mode):
    with pytest.raises(DrOptionsError, match="overlapping targets"):
        _opts("s3://src/flink/checkpoints=s3://dr/x", "s3://src/flink/savepoints=s3://dr/x/y",
              mode=mode).mapping(ROOTS)
    with pytest.raises(DrOptionsError, match="no target allowlist"):
        DrOptions(targets=TargetSpec.parse(["s3://dr/x"])).check()
    with pytest.raises(DrOptionsError, match="no target given"):
        DrOptions(allowed_targets=("s3://dr",)).check()
    with pytest.raises(DrOptionsError, match="two target bases"):
        TargetSpec.parse(["s3://dr/a", "s3://dr/b"])


def test_snapshot_and_target_spelling():
    assert snapshots_from(["s3://b/ck/job/chk-3/"]) == ("s3://b/ck/job/chk-3/_metadata",)
    assert snapshots_from(["s3://b/ck/job/chk-3/_metadata"]) == ("s3://b/ck/job/chk-3/_metadata",)
    assert snapshots_from(["", "s3://b/a/chk-1,s3://b/a/chk-2/_metadata"]) == ("s3://b/a/chk-1/_metadata",
                                                                              "s3://b/a/chk-2/_metadata")
    assert target_of("s3://src/flink/checkpoints/j/shared/x", {"s3://src/flink": "s3://dr/a",
                                                              "s3://src/flink/checkpoints": "s3://dr/c"}) \
        == "s3://dr/c/j/shared/x"
    assert target_of("s3://src/flinkx/y", {"s3://src/flink": "s3://dr/a"}) is None
    assert external_target("s3://other/e/f", "s3://dr/c") == "s3://dr/c/_external/s3/other/e/f"
    assert external_target("file:///mnt/e/f", "s3://dr/c") == "s3://dr/c/_external/file/mnt/e/f"


def test_entry_point_refuses_a_target_outside_the_allowlist_before_spark(tmp_path, capsys):
    from spark_jobs.copy_to_dr import main

    code = main(["--warehouse", str(tmp_path / "w"), "--target", str(tmp_path / "dr"),
                 "--allowed-targets", str(tmp_path / "allowed")])
    assert code == 2
    assert not (tmp_path / "dr").exists() and not (tmp_path / "w").exists()


def test_relocating_a_real_chain_checkpoint(flink_fixture):
    """C of a CLAIM chain names A's and B's shared/: every absolute path moves, relative names stay."""
    import tests.harness as harness

    fx = flink_fixture(harness.FLINK_VERSIONS[-1], "chain_claim")
    root = normalize_uri(str(fx.root))
    c = max(fx.job("C")["retained_checkpoints"], key=lambda d: int(d.rsplit("-", 1)[1]))
    meta = normalize_uri(c) + "/_metadata"
    target_meta = "s3://dr/flink" + meta[len(root):]
    with open(meta[len("file://"):], "rb") as src:
        moved = relocate(src, meta, target_meta, {root: "s3://dr/flink"})
    try:
        before = extract_references(open_metadata(meta[len("file://"):]), meta)
        assert moved.files and all(u.startswith("s3://dr/flink/") for u in moved.files)
        assert {root + u[len("s3://dr/flink"):] for u in moved.files} == set(before.physical_files())
        assert moved.changed > 0
        again = extract_references(read_metadata(io.BytesIO(moved.body.read()), target_meta), target_meta)
        relative = {f.stored_path for f in before.files if f.handle_kind == "RELATIVE_STREAM_STATE_HANDLE"}
        assert relative == {f.stored_path for f in again.files if f.handle_kind == "RELATIVE_STREAM_STATE_HANDLE"}
    finally:
        moved.close()
    # a mapping that misses A's job directory leaves locations unmapped: refused, nothing produced
    b_dir = normalize_uri(fx.job("B")["job_dir"])
    with open(meta[len("file://"):], "rb") as src, pytest.raises(RelocateError, match="outside every mapped root"):
        relocate(src, meta, target_meta, {b_dir: "s3://dr/b", normalize_uri(fx.job("C")["job_dir"]): "s3://dr/c"})
