"""The index against real Flink stores: every harness scenario and version on local disk, every scenario of
the newest version on S3 (every version with --full-matrix).

Ground truth: the listing of the store itself (files), Flink's own `Checkpoints.loadCheckpointMetadata`
through the harness oracle (snapshots, references, inline bytes) and the harness manifest (what the
scenario planted: failed checkpoints, orphan files, cross-job restores).

A store uploaded to S3 keeps the absolute `file://` paths Flink wrote inside `_metadata`: absolute
handles of the S3 copy still name the local store (kind `external`), while relative handles resolve
beside the S3 `_metadata`. The comparison maps S3 URIs back to the local store to check both. What S3
adds to the local pass (reading from the bucket, that mapping of absolute and relative handles) does
not depend on the Flink version, whose codec the local pass checks on every version: `make test` runs
S3 on the newest version only, the older versions' S3 cases are `full_matrix`.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import tests.harness as harness
from statekeeper.tables import Warehouse
from statekeeper.tables.vocabulary import FileKind
from statekeeper.uri import normalize_uri
from tests.index.support import TABLES, fixture_roots, local_listing, run_index, table_rows
from tests.plugins.flink import flink_version_scenarios

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]


def _params() -> list:
    """(backend, version, scenario) as "<backend>-<version>-<scenario>": local on every version, S3 on the
    newest in `make test` and on the others with --full-matrix (see the module docstring for why)."""
    params = []
    for backend in ("local", "s3"):
        for version, scenario in flink_version_scenarios():
            marks = []
            if backend == "s3":
                # By hand: the S3 index is reached through getfixturevalue, which the tiering in
                # tests/conftest.py does not see.
                marks.append(pytest.mark.s3)
                if version != harness.FLINK_VERSIONS[-1]:
                    marks.append(pytest.mark.full_matrix)
            params.append(pytest.param(backend, version, scenario, id=f"{backend}-{version}-{scenario}", marks=marks))
    return params


PARAMS = _params()


class Indexed:
    """One index run over every scenario of one Flink version, and its tables."""

    def __init__(self, result, warehouse: Warehouse, roots_by_scenario: dict[str, list[tuple[str, Path]]]):
        self.result = result
        self.roots_by_scenario = roots_by_scenario  # scenario -> [(indexed root uri, local dir)]
        self.tables = {name: table_rows(warehouse, name) for name in TABLES}

    def mapping(self, scenario: str) -> list[tuple[str, str]]:
        return [(uri.rstrip("/") + "/", normalize_uri(str(local)) + "/") for uri, local in self.roots_by_scenario[scenario]]

    def to_local(self, scenario: str, uri: str) -> str:
        for indexed, local in self.mapping(scenario):
            if uri.startswith(indexed):
                return local + uri[len(indexed):]
        return uri

    def rows(self, table: str, scenario: str) -> list[dict]:
        roots = {normalize_uri(uri) for uri, _ in self.roots_by_scenario[scenario]}
        return [r for r in self.tables[table] if r["root"] in roots]


@pytest.fixture(scope="module")
def oracle(flink_fixture):
    """(version, scenario) -> {local metadata uri: Flink's reading}; one oracle JVM per version."""
    cache: dict[str, dict[str, dict[str, dict]]] = {}

    def get(version: str, scenario: str) -> dict[str, dict]:
        if version not in cache:
            per_scenario = {s: flink_fixture(version, s).metadata_files() for s in harness.scenarios_for(version)}
            paths = [p for files in per_scenario.values() for p in files]
            readings = harness.run_oracle(version, paths)
            by_path = {normalize_uri(str(p)): r for p, r in zip(paths, readings, strict=True)}
            cache[version] = {s: {normalize_uri(str(p)): by_path[normalize_uri(str(p))] for p in files}
                              for s, files in per_scenario.items()}
        return cache[version][scenario]
    return get


@pytest.fixture(scope="module")
def local_index(spark, flink_fixture, tmp_path_factory):
    cache: dict[str, Indexed] = {}

    def get(version: str) -> Indexed:
        if version not in cache:
            roots = {s: [(str(p), p) for p in fixture_roots(flink_fixture(version, s))]
                     for s in harness.scenarios_for(version)}
            warehouse = Warehouse(str(tmp_path_factory.mktemp(f"wh-{version}")))
            result = run_index(spark, [u for rs in roots.values() for u, _ in rs], warehouse)
            cache[version] = Indexed(result, warehouse, roots)
        return cache[version]
    return get


@pytest.fixture(scope="module")
def s3_index(spark, flink_fixture, s3_config, s3_upload_tree):
    from tests.plugins.s3 import make_bucket

    cache: dict[str, Indexed] = {}

    def get(version: str) -> Indexed:
        if version not in cache:
            bucket = make_bucket(s3_config, "idx")
            roots: dict[str, list[tuple[str, Path]]] = {}
            for s in harness.scenarios_for(version):
                roots[s] = []
                for local in fixture_roots(flink_fixture(version, s)):
                    uri = f"s3://{bucket}/{s}/{local.name}"
                    s3_upload_tree(local, uri)
                    roots[s].append((uri, local))
            warehouse = Warehouse(f"s3://{bucket}/warehouse", s3_config)
            # Empty local root dirs (a scenario without savepoints) upload as prefixes with no object.
            result = run_index(spark, [u for rs in roots.values() for u, _ in rs], warehouse, storage=s3_config,
                               allow_empty_root=True)
            cache[version] = Indexed(result, warehouse, roots)
        return cache[version]
    return get


@pytest.fixture
def indexed(request):
    """(the backend's index of a version, backend): `indirect` from the test's parametrization."""
    return request.getfixturevalue(f"{request.param}_index"), request.param


@pytest.mark.parametrize("indexed, version, scenario", PARAMS, indirect=["indexed"])
def test_index_matches_ground_truth(indexed, version, scenario, flink_fixture, oracle):
    index_of, backend = indexed
    idx = index_of(version)
    fixture = flink_fixture(version, scenario)
    truth = oracle(version, scenario)
    assert idx.result.status == "succeeded", idx.result.summary()

    # -- files: exactly the listing, classified --------------------------------------------------
    files = idx.rows("files", scenario)
    expected = {}
    for _, local in idx.roots_by_scenario[scenario]:
        expected.update(local_listing(local))
    assert {idx.to_local(scenario, r["uri"]): r["size"] for r in files} == expected
    kinds = {idx.to_local(scenario, r["uri"]): r["kind"] for r in files}
    assert FileKind.UNKNOWN.value not in kinds.values(), [u for u, k in kinds.items() if k == "unknown"]
    for uri in truth:
        in_chk = "/chk-" in uri
        assert kinds[uri] == ("checkpoint_metadata" if in_chk else "savepoint_metadata"), uri
    for job in fixture.manifest["jobs"]:
        for row in files:
            if idx.to_local(scenario, row["uri"]).startswith(normalize_uri(job["job_dir"]) + "/"):
                assert row["job_id"] == job["job_id"] == row["job_dir"]

    # -- snapshots: one per _metadata, as Flink reads it -----------------------------------------
    snapshots = {idx.to_local(scenario, r["uri"]): r for r in idx.rows("snapshots", scenario)}
    assert set(snapshots) == set(truth)
    for uri, flink in truth.items():
        row = snapshots[uri]
        assert row["status"] == "ok", (uri, row["error"])
        assert row["checkpoint_id"] == flink["checkpoint_id"]
        assert row["metadata_version"] == flink["metadata_version"] == harness.metadata_version_for(version)
        props = flink["properties"]
        assert row["snapshot_type"] == props["snapshot_type"]
        assert row["snapshot_format"] == (props["format"].lower() if props["format"] else None)
        assert row["sharing"] == (props["sharing"].lower() if props["sharing"] else None)
        assert row["operator_count"] == len(flink["operators"])
        assert sorted(o["operator_id"] for o in row["operators"]) == sorted(o["id"] for o in flink["operators"])
        master = sum(m["bytes"] for m in flink["master_states"])
        assert row["inline_bytes"] == flink["inline_bytes_total"] + master
        assert row["referenced_file_count"] == len(flink["referenced_files"])
        assert row["metadata_size"] == Path(uri[len("file://"):]).stat().st_size

    # -- references: the files Flink's handles name ------------------------------------------------
    refs_by_snapshot: dict[str, list[dict]] = {}
    for r in idx.rows("references", scenario):
        refs_by_snapshot.setdefault(idx.to_local(scenario, r["snapshot_uri"]), []).append(r)
    for uri, flink in truth.items():
        refs = refs_by_snapshot.get(uri, [])
        files_refs = [r for r in refs if r["scope"] != "file_merging_managed_dir"]
        got_extent: dict[str, int] = {}
        for r in files_refs:
            local = idx.to_local(scenario, r["file_uri"])
            extent = r["stated_size"] if r["segment_start"] is None else r["segment_start"] + r["segment_length"]
            got_extent[local] = max(got_extent.get(local, 0), extent)
        want_extent = {normalize_uri(f["path"]): f["size"] for f in flink["referenced_files"]}
        assert got_extent == want_extent, uri
        segments = Counter((idx.to_local(scenario, r["file_uri"]), r["segment_start"], r["segment_length"])
                           for r in files_refs if r["handle_kind"] == "SEGMENT_FILE_HANDLE")
        want_segments = Counter((normalize_uri(h["path"]), h["start_pos"], h["size"]) for h in flink["handles"]
                                if h["class"].endswith(".SegmentFileStateHandle"))
        assert segments == want_segments, uri
        dirs = {idx.to_local(scenario, r["file_uri"]) for r in refs if r["scope"] == "file_merging_managed_dir"}
        want_dirs = {normalize_uri(d) for h in flink["handles"] for d in (h["managed_dirs"] or [])}
        assert dirs == want_dirs, uri
        # Ownership columns: a file is attributed to the root/job directory it lies in.
        for r in files_refs:
            if r["file_uri"].startswith("file://") and backend == "s3":
                assert r["file_kind"] == "external" and r["file_root"] is None  # the store's absolute paths
            elif r["file_root"] is not None:
                rel = r["file_uri"][len(r["file_root"]) + 1:]
                assert r["file_job_dir"] == rel.split("/")[0]
                assert r["file_kind"] != "external"
        # Inline state rows add up to the snapshot's inline bytes.
        inline = [i for i in idx.rows("inline_state", scenario) if idx.to_local(scenario, i["snapshot_uri"]) == uri]
        assert sum(i["inline_bytes"] for i in inline) == snapshots[uri]["inline_bytes"]

    # -- scenario specifics from the manifest -------------------------------------------------------
    by_local = {idx.to_local(scenario, r["uri"]): r for r in files}
    for planted in fixture.manifest["planted_failed_checkpoints"]:
        for path in planted["files"]:
            row = by_local[normalize_uri(path)]
            expected_kind = "inprogress_metadata" if "._metadata.inprogress." in path else "exclusive"
            assert row["kind"] == expected_kind
            assert row["checkpoint_id"] == int(Path(planted["dir"]).name.split("-")[1])
    referenced = {idx.to_local(scenario, r["file_uri"]) for r in idx.rows("references", scenario)}
    for orphan in fixture.manifest["orphan_files"]:
        assert by_local[normalize_uri(orphan)]["kind"] == "shared"
        assert normalize_uri(orphan) not in referenced
    # Cross-job attribution: per snapshot, how many referenced files lie in each job directory,
    # derived independently from Flink's own reading (restored jobs reference their source's shared/).
    local_roots = [normalize_uri(str(local)) + "/" for _, local in idx.roots_by_scenario[scenario]]

    def job_dir_of(local_uri: str):
        for root in local_roots:
            if local_uri.startswith(root):
                return local_uri[len(root):].split("/")[0]
        return None

    for uri, flink in truth.items():
        want = Counter(job_dir_of(normalize_uri(f["path"])) for f in flink["referenced_files"])
        seen: dict[str, str | None] = {}
        for r in refs_by_snapshot.get(uri, []):
            if r["scope"] != "file_merging_managed_dir":
                local = idx.to_local(scenario, r["file_uri"])
                seen[local] = r["file_job_dir"] if r["file_root"] is not None else job_dir_of(local)
        assert Counter(seen.values()) == want, uri
