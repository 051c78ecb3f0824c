"""One spelling per object: the canonical address and what Flink opens for a stored path.

The rules are in statekeeper.uri and docs/tables.md ("Canonical paths"). Storage tests run on real
local files and the session's S3 server (SeaweedFS): a listed object must be addressed by exactly its listed key.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statekeeper.format.references import UnresolvableReferenceError
from statekeeper.storage import LocalFileIO, RoutingFileIO
from statekeeper.uri import flink_path_uri, join_uri, normalize_uri, resolve_relative

_SEGMENT = st.sampled_from(["a", "b", "x%41", "x%2541", "odd dir", "p+q", ".", "..", "", "chk-1", "_metadata",
                            "%", "%zz", "ä", "a b%20c"])
_PREFIX = st.sampled_from(["/", "file:/", "file://", "file:///", "file://localhost/", "s3://bkt/", "s3a://bkt/",
                           "s3p://bkt/", "S3://bkt/", "hdfs://nn:8020/"])


@settings(max_examples=600, deadline=None)
@given(_PREFIX, st.lists(_SEGMENT, min_size=1, max_size=8), st.booleans())
def test_canonical_form_is_idempotent_and_preserves_percent_signs(prefix, segments, trailing):
    uri = prefix + "/".join(segments) + ("/" if trailing else "")
    for fn in (normalize_uri, flink_path_uri):
        try:
            once = fn(uri)
        except ValueError:
            continue
        assert normalize_uri(once) == once, (fn.__name__, uri, once)
        try:
            opened = flink_path_uri(once)
        except ValueError:
            continue  # e.g. the S3 key "..": an object, but no path Flink can open
        assert flink_path_uri(opened) == opened == normalize_uri(opened)
        # Percent signs are literal characters in Flink paths: never decoded, never added.
        assert once.count("%") == "/".join(s for s in segments).count("%") or ".." in segments, (uri, once)


_WHOLE_PREFIX = st.sampled_from(["file:///", "file:////", "file://localhost/", "file:/", "/", "s3://bkt/", "s3:///",
                                 "s3://", "gs://bkt/", "oss://bkt/", "gs:///", "s3a://bkt/", "abfss://c@a.dfs.x.net/"])
_WHOLE_SEGMENT = st.sampled_from(["a", "", ".", "..", ".hidden", "..x", "sst-\x00ff", "k//x", "a b"])


@settings(max_examples=800, deadline=None)
@given(_WHOLE_PREFIX, st.lists(_WHOLE_SEGMENT, max_size=5), st.booleans())
def test_a_uri_answered_as_its_own_normal_form_is_what_taking_it_apart_gives(prefix, segments, trailing):
    """normalize_uri returns a canonical spelling unchanged without taking it apart (plans hold millions): that
    answer, and every refusal, must be what the general path gives for the same spelling."""
    import statekeeper.uri as uri_module

    uri = prefix + "/".join(segments) + ("/" if trailing else "")

    def answer(fn):
        try:
            return fn(uri)
        except ValueError as exc:
            return ("refused", str(exc))

    fast = answer(normalize_uri)
    general = uri_module._is_normal
    try:
        uri_module._is_normal = lambda _uri: False
        slow = answer(normalize_uri)
    finally:
        uri_module._is_normal = general
    assert fast == slow, uri
    if general(uri):
        assert fast == uri


def test_percent_encoded_names_are_literal():
    assert normalize_uri("file:///a/x%2541") == "file:///a/x%2541"
    assert normalize_uri("file:///a/x%41") == "file:///a/x%41"
    assert flink_path_uri("file:/tmp/odd dir%41+x/shared/f") == "file:///tmp/odd dir%41+x/shared/f"
    assert normalize_uri("s3://b/k/odd%41") == "s3://b/k/odd%41"


def test_object_store_keys_are_verbatim_but_flink_paths_are_normalized():
    # Three different S3 objects...
    assert len({normalize_uri(u) for u in ("s3://b/k//x", "s3://b/k/./x", "s3://b/k/x")}) == 3
    # ...but Flink's Path turns each stored spelling into the same key, so a reference names k/x.
    assert {flink_path_uri(u) for u in ("s3://b/k//x", "s3a://b/k/./x", "s3p://b/k/y/../x")} == {"s3://b/k/x"}
    assert normalize_uri("s3a://b/k/") == "s3://b/k"


def test_local_spellings_of_one_file_agree():
    spellings = ["/a/b/c", "file:/a/b/c", "file:///a/b/c", "file://localhost/a/b/c", "file:/a//b/./c/"]
    assert {normalize_uri(s) for s in spellings} == {"file:///a/b/c"}
    assert {flink_path_uri(s) for s in spellings} == {"file:///a/b/c"}
    assert flink_path_uri("file:/a\\b") == "file:///a/b"      # Flink's Path turns backslashes into '/'
    assert normalize_uri("file:///a\\b") == "file:///a\\b"    # a listed name keeps them


@pytest.mark.parametrize("bad", ["file:etc/passwd", "etc/passwd", "file://host/x", "s3:///k", "/../x", ""])
def test_unresolvable_spellings_are_errors(bad):
    with pytest.raises(ValueError):
        normalize_uri(bad)
    with pytest.raises(ValueError):
        flink_path_uri(bad)


def test_relative_handles_resolve_as_flink_does():
    assert resolve_relative("file:///r/job/chk-3", "x%41") == "file:///r/job/chk-3/x%41"
    assert resolve_relative("s3://b/r/job/chk-3/", "sub/../y") == "s3://b/r/job/chk-3/y"
    assert join_uri("s3://b/w/", "files/root_id=1/p.parquet") == "s3://b/w/files/root_id=1/p.parquet"


def test_a_relative_stored_path_is_a_parse_error_not_a_crash():
    """`file:etc/passwd` in a `_metadata` names no object we can know (Flink would resolve it
    against its own working directory): extraction refuses it, so the index records a
    `parse_error` snapshot (a validation finding) instead of a URI with host `etc`."""
    from statekeeper.format import extract_references
    from statekeeper.format.model import FileHandle
    from statekeeper.format.walk import transform
    from tests.format.support.samples import sample_model

    def plant(site, role, local_name, node):
        return FileHandle("file:etc/passwd", node.size) if type(node) is FileHandle else node

    model = transform(sample_model(6), plant)
    with pytest.raises(UnresolvableReferenceError, match="etc/passwd"):
        extract_references(model, "file:///r/job/chk-7/_metadata")


def _stores(request, tmp_path):
    """(FileIO, base URI, whether the store holds keys a file system cannot have)."""
    if request.param == "local":
        return LocalFileIO(), "file://" + str(tmp_path), False
    if request.param == "s3_any_key":
        from tests.plugins.s3 import make_bucket

        config = request.getfixturevalue("plain_moto_server").config()
        return RoutingFileIO(config), f"s3://{make_bucket(config)}/root", True
    config = request.getfixturevalue("s3_config")
    bucket = request.getfixturevalue("s3_bucket")
    return RoutingFileIO(config), f"s3://{bucket}/root", False


# `s3`: the session's SeaweedFS. `s3_any_key`: a store that holds every key AWS S3 holds, `a//b` and `a/./b`
# beside `a/b` (moto): SeaweedFS keeps its objects in a file tree, so it folds `//` into `/` (the orphan would
# overwrite the live object) and refuses `/./` (InvalidRequest).
@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3),
                        pytest.param("s3_any_key", marks=pytest.mark.s3)])
def store(request, tmp_path):
    return _stores(request, tmp_path)


def test_listed_objects_are_addressed_by_their_listed_key(store):
    """The index keeps what the listing said; every call must hit that object and no other."""
    fio, base, any_key = store
    live = base + "/job/shared/live%41"
    fio.write(live, b"live")
    fio.write(base + "/job/shared/other", b"other")
    if any_key:
        # Keys a file system cannot have: the orphan must be deletable without touching the live
        # object that a collapsing spelling would name.
        fio.write(base + "/job/shared//other", b"orphan-double-slash")
        fio.write(base + "/job/shared/./other", b"orphan-dot")
    listed = {i.uri: i for i in fio.list(base + "/job")}
    assert live in listed, sorted(listed)
    for uri, info in listed.items():
        assert normalize_uri(uri) == uri, uri
        assert fio.read_bytes(uri) == fio.read_bytes(uri, info=info)
        assert fio.stat(uri).size == info.size
    orphans = [u for u in listed if "//other" in u[len(base):] or "/./other" in u]
    report = fio.delete_many(orphans)
    assert sorted(report.deleted) == sorted(orphans) and report.ok
    remaining = {i.uri for i in fio.list(base + "/job")}
    assert remaining == {live, base + "/job/shared/other"}
    assert fio.read_bytes(base + "/job/shared/other") == b"other"


def test_local_file_named_with_percent_is_found_by_its_flink_reference(tmp_path):
    odd = tmp_path / "odd dir%41+x" / "job" / "shared"
    odd.mkdir(parents=True)
    (odd / "f%2541").write_bytes(b"x")
    listed = [i.uri for i in LocalFileIO().list("file://" + str(tmp_path))]
    # What Flink writes into _metadata for that file (Path.toString(): file:/..., unencoded).
    stored = "file:" + os.path.join(str(odd), "f%2541")
    assert listed == [flink_path_uri(stored)]
