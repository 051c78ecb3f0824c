"""The GC deleter on real files, a real S3 endpoint (SeaweedFS on loopback, optionally behind the
fault-injecting proxy; also standing in for OSS) and the GCS and Azure emulators: re-check before
delete, deletes conditional on the planned version (GCS, Azure), the roots guard, exact spelling,
delete order, batching, rate limit, retries."""
from __future__ import annotations

import logging
import os
import pickle
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from statekeeper.gc.deleter import DeleteResult, Deleter, DeleteSettings, PlannedDelete
from statekeeper.storage import LocalFileIO, RoutingFileIO, StorageConfig
from statekeeper.storage.azure import AzureFileIO
from statekeeper.storage.enforcement import Enforcement, Guard, Proof, Verdict, store_identity
from statekeeper.storage.gcs import GcsFileIO
from statekeeper.storage.local import file_uri
from statekeeper.storage.model import ConditionalDelete, ConditionalOutcome
from statekeeper.storage.s3 import S3FileIO, make_s3_client
from statekeeper.tables.vocabulary import GcOutcome
from tests.plugins.object_stores import azure_uri

FAST_RETRY = {"backoff_base": 0.005, "backoff_max": 0.05}


class Progress:
    """on_progress sink: sums the increments, as a Spark accumulator would."""

    def __init__(self) -> None:
        self.files = self.bytes = self.retries = self.calls = 0

    def __call__(self, files: int, size: int, retries: int) -> None:
        self.files += files
        self.bytes += size
        self.retries += retries
        self.calls += 1


def proven(config: StorageConfig, *roots: str) -> Enforcement:
    """The stores of `roots` self-tested now, as GC does on the driver before its tasks delete: a test that counts
    or fakes the delete requests hands this to the Deleter, so that the self-test's own requests stay out of it."""
    enforcement = Enforcement(config)
    enforcement.prove(roots, [Guard.CONDITIONAL_DELETE])
    return enforcement


def planned(info, order: int = 1) -> PlannedDelete:
    return PlannedDelete(info.uri, info.size, info.mtime, info.etag, order)


def by_uri(results: list[DeleteResult]) -> dict[str, DeleteResult]:
    return {r.uri: r for r in results}


# -- local -----------------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "checkpoints"
    (base / "job1" / "shared").mkdir(parents=True)
    (base / "job1" / "taskowned").mkdir()
    return base


def write(path: Path, data: bytes = b"state") -> PlannedDelete:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return planned(LocalFileIO().stat(str(path)))


def run_local(root: Path, items: list[PlannedDelete], **settings) -> list[DeleteResult]:
    results = list(Deleter(StorageConfig(), [str(root)], DeleteSettings(**settings)).run(items))
    assert len(results) == len(items)
    return results


def test_local_deletes_planned_files_and_the_emptied_chk_dir(root: Path) -> None:
    chk = root / "job1" / "chk-7"
    items = [write(chk / "_metadata"), write(chk / "a"), write(root / "job1" / "shared" / "s1")]
    progress = Progress()
    results = list(Deleter(StorageConfig(), [str(root)], on_progress=progress).run(items))
    assert [r.outcome for r in results] == [GcOutcome.DELETED] * 3
    assert all(r.retries == 0 and r.attempted_at.tzinfo is not None for r in results)
    assert not chk.exists()
    # shared/, taskowned/ and the job directory stay, even when empty.
    assert (root / "job1" / "shared").is_dir() and (root / "job1" / "taskowned").is_dir()
    assert (progress.files, progress.bytes, progress.retries) == (3, 3 * len(b"state"), 0)


def test_local_chk_dir_kept_while_it_holds_unplanned_files(root: Path) -> None:
    chk = root / "job1" / "chk-8"
    item = write(chk / "a")
    write(chk / "b")
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.DELETED
    assert sorted(p.name for p in chk.iterdir()) == ["b"]


def test_local_already_gone(root: Path) -> None:
    path = root / "job1" / "shared" / "gone"
    item = write(path)
    path.unlink()
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.ALREADY_GONE and result.outcome.done


def test_local_changed_size_is_skipped(root: Path) -> None:
    path = root / "job1" / "shared" / "grew"
    item = write(path, b"1234")
    path.write_bytes(b"123456789")
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.CHANGED_SKIPPED
    assert "size 4 -> 9" in result.message and "not deleted" in result.message
    assert path.read_bytes() == b"123456789"


def test_local_replaced_file_with_same_size_and_mtime_is_skipped(root: Path) -> None:
    # An atomic replace (new inode) with identical size and mtime: only the etag (inode) tells.
    path = root / "job1" / "shared" / "replaced"
    item = write(path, b"old!")
    st = path.stat()
    tmp = path.with_name("replacement.tmp")
    tmp.write_bytes(b"new!")
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.CHANGED_SKIPPED and "etag" in result.message
    assert path.read_bytes() == b"new!"


def test_local_symlink_is_never_deleted_nor_followed(root: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "precious"
    target.parent.mkdir()
    target.write_bytes(b"keep me")
    link = root / "job1" / "shared" / "link"
    link.symlink_to(target)
    [info] = [i for i in LocalFileIO().list(str(root)) if i.uri.endswith("/link")]   # the link's own lstat
    [result] = run_local(root, [planned(info)])
    assert result.outcome is GcOutcome.CHANGED_SKIPPED and "symlink" in result.message
    assert link.is_symlink() and target.read_bytes() == b"keep me"


def test_local_path_through_a_symlinked_directory_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-dir"
    victim = outside / "victim"
    victim.parent.mkdir()
    victim.write_bytes(b"x")
    info = LocalFileIO().stat(str(victim))
    (root / "job1" / "chk-3").symlink_to(outside, target_is_directory=True)
    item = PlannedDelete(file_uri(str(root / "job1" / "chk-3" / "victim")), info.size, info.mtime, info.etag)
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.FAILED
    assert "symlink" in result.message and "not deleted" in result.message and item.uri in result.message
    assert victim.exists() and (root / "job1" / "chk-3").is_symlink()


def test_local_outside_roots_is_refused(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "not-a-root" / "job1" / "chk-1" / "f"
    item = write(other)
    [result] = run_local(root, [item])
    assert result.outcome is GcOutcome.FAILED
    assert "outside the configured roots" in result.message and "not deleted" in result.message
    assert other.exists()


def test_local_undecodable_name(root: Path) -> None:
    raw = os.fsencode(str(root / "job1" / "shared")) + b"/sst-\xff\xfe"
    with open(raw, "wb") as f:
        f.write(b"x")
    [info] = [i for i in LocalFileIO().list(str(root)) if "sst-" in i.uri]
    assert "\x00ff" in info.uri
    [result] = run_local(root, [planned(info)])
    assert result.outcome is GcOutcome.DELETED and not os.path.lexists(raw)


def test_local_lower_delete_order_finishes_before_a_higher_one_starts(root: Path) -> None:
    chk = root / "job1" / "chk-9"
    first = [write(chk / "_metadata")]
    later = [write(chk / f"f{i}") for i in range(50)]
    items = [PlannedDelete(i.uri, i.size, i.mtime, i.etag, 1) for i in later[:25]]
    items += [PlannedDelete(i.uri, i.size, i.mtime, i.etag, 0) for i in first]
    items += [PlannedDelete(i.uri, i.size, i.mtime, i.etag, 1) for i in later[25:]]
    results = Deleter(StorageConfig(), [str(root)], DeleteSettings(local_threads=4)).run(items)
    head = next(results)
    # The `_metadata` is gone before any order-1 file has been touched.
    assert head.uri == first[0].uri and head.outcome is GcOutcome.DELETED
    assert not (chk / "_metadata").exists() and len(list(chk.iterdir())) == 50
    rest = list(results)
    assert len(rest) == 50 and all(r.outcome is GcOutcome.DELETED for r in rest)
    assert not chk.exists()


# -- S3 ----------------------------------------------------------------------------------------------


def put_keys(config: StorageConfig, bucket: str, keys: list[str], body: bytes = b"chunk") -> None:
    client = make_s3_client(config, max_pool_connections=16)
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=body), keys))


def plan_s3(config: StorageConfig, directory: str, order: int = 1) -> list[PlannedDelete]:
    return [planned(info, order) for info in S3FileIO(config).list(directory)]


def remaining_keys(config: StorageConfig, bucket: str) -> set[str]:
    return {i.uri for i in S3FileIO(config).list(f"s3://{bucket}")}


def test_s3_deletes_many_keys_in_batches_across_prefixes(s3_config: StorageConfig, s3_bucket: str) -> None:
    # A tenth of the keys of a real batch test (650 a prefix, batches of 400, S3's 1,000-key listing pages), with
    # batch size and page size scaled down alike: still six delete batches across the prefixes and listings of
    # three pages, for a tenth of the puts.
    paged = s3_config.with_overrides(list_page_size=100)
    prefixes = ["cp/job1/shared", "cp/job1/chk-3", "cp/job2/shared", "cp/job2/taskowned"]
    keys = [f"{p}/{uuid.UUID(int=i).hex}" for p in prefixes for i in range(65)]
    keys += ["cp/job1/shared/sub/nested", "cp/job1/shared-sibling"]   # must be skipped over by listings
    put_keys(paged, s3_bucket, keys)
    everything = plan_s3(paged, f"s3://{s3_bucket}/cp")
    keep = {f"s3://{s3_bucket}/{k}" for k in keys[::10]} | {f"s3://{s3_bucket}/cp/job1/shared/sub/nested",
                                                            f"s3://{s3_bucket}/cp/job1/shared-sibling"}
    items = [i for i in everything if i.uri not in keep]
    assert len(items) == 234 and len(keys) > 2 * paged.list_page_size   # 6 batches of <= 40; 3 listing pages
    progress = Progress()
    deleter = Deleter(paged, [f"s3://{s3_bucket}/cp"], DeleteSettings(batch_size=40), on_progress=progress)
    results = list(deleter.run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: len(items)}
    assert {r.uri for r in results} == {i.uri for i in items}
    assert remaining_keys(paged, s3_bucket) == keep
    assert (progress.files, progress.bytes, progress.retries) == (len(items), 5 * len(items), 0)
    assert progress.calls > 1   # incremental, not once at the end
    # Picklable after use (a Spark task may hold it): the client is rebuilt lazily.
    clone = pickle.loads(pickle.dumps(deleter))
    assert clone._client is None and list(clone.run([])) == []


def test_s3_recheck_changed_gone_and_outside(s3_config: StorageConfig, s3_bucket: str) -> None:
    base = "cp/job1/shared"
    put_keys(s3_config, s3_bucket, [f"{base}/k{i:04d}" for i in range(20)] + ["other/x"], body=b"AAAA")
    items = plan_s3(s3_config, f"s3://{s3_bucket}/{base}")
    outside = plan_s3(s3_config, f"s3://{s3_bucket}/other")
    client = make_s3_client(s3_config)
    client.put_object(Bucket=s3_bucket, Key=f"{base}/k0003", Body=b"BBBB")      # same size, new etag
    client.put_object(Bucket=s3_bucket, Key=f"{base}/k0004", Body=b"BBBBBB")    # new size
    client.delete_object(Bucket=s3_bucket, Key=f"{base}/k0005")
    results = by_uri(list(Deleter(s3_config, [f"s3://{s3_bucket}/cp"]).run(items + outside)))
    uri = f"s3://{s3_bucket}/{base}/k000"
    assert results[uri + "3"].outcome is GcOutcome.CHANGED_SKIPPED and "etag" in results[uri + "3"].message
    assert results[uri + "4"].outcome is GcOutcome.CHANGED_SKIPPED and "size 4 -> 6" in results[uri + "4"].message
    assert results[uri + "5"].outcome is GcOutcome.ALREADY_GONE
    [refused] = [results[i.uri] for i in outside]
    assert refused.outcome is GcOutcome.FAILED and "outside the configured roots" in refused.message
    assert Counter(r.outcome for r in results.values())[GcOutcome.DELETED] == 17
    assert remaining_keys(s3_config, s3_bucket) == {uri + "3", uri + "4", f"s3://{s3_bucket}/other/x"}


def test_s3_sparse_candidates_fall_back_to_head(s3_config: StorageConfig, s3_bucket: str, slow_s3) -> None:
    # 3 candidates among 1,200 keys: the first page (from just before k00010) scans 1,000 keys to
    # resolve one of them; the two beyond it are re-checked by HEAD instead of another page.
    keys = [f"cp/job1/shared/k{i:05d}" for i in range(1200)]
    put_keys(s3_config, s3_bucket, keys)
    wanted = {f"s3://{s3_bucket}/{keys[i]}" for i in (10, 1100, 1150)}
    items = [i for i in plan_s3(s3_config, f"s3://{s3_bucket}/cp") if i.uri in wanted]
    # The re-check by listing: for S3-compatible stores that ignore the per-key ETag (an explicit setting).
    results = list(Deleter(slow_s3.config.with_overrides(delete_recheck="listing"), [f"s3://{s3_bucket}/cp"]).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 3}
    assert slow_s3.forwarded["list"] == 1 and slow_s3.forwarded["head"] == 2 and slow_s3.forwarded["delete"] == 1
    assert len(remaining_keys(s3_config, s3_bucket)) == 1197


def test_s3_rate_limit_counts_and_outcomes(s3_config: StorageConfig, s3_bucket: str, slow_s3) -> None:
    put_keys(s3_config, s3_bucket, [f"cp/job1/shared/k{i:04d}" for i in range(300)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    settings = DeleteSettings(max_deletes_per_second=500, batch_size=50, requests_in_flight=2)
    enforcement = proven(slow_s3.config, f"s3://{s3_bucket}/cp")
    sent = slow_s3.forwarded["delete"]   # the self-test's
    results = list(Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"], settings, enforcement=enforcement).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 300}
    # Batches are not merged or split by the limiter: 6 requests of 50 keys each.
    assert slow_s3.forwarded["delete"] == sent + 6
    assert remaining_keys(s3_config, s3_bucket) == set()

    # A limit below the batch size shrinks batches to one second's worth: 100 keys at 40/s in 3 requests.
    put_keys(s3_config, s3_bucket, [f"cp/job1/shared/k{i:04d}" for i in range(100)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    settings = DeleteSettings(max_deletes_per_second=40, requests_in_flight=4)
    results = list(Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"], settings, enforcement=enforcement).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 100}
    assert slow_s3.forwarded["delete"] == sent + 6 + 3


def test_s3_throttled_deletes_complete_and_count_retries(s3_config: StorageConfig, s3_bucket: str, slow_s3,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    # Keys and batch size a tenth of a GC run's (1,000 and 100): the same 30 delete requests, every 3rd
    # throttled, for a tenth of the puts.
    batch = 10
    prefixes = ["cp/job1/shared", "cp/job1/chk-5", "cp/job2/shared"]
    put_keys(s3_config, s3_bucket, [f"{p}/k{i:05d}" for p in prefixes for i in range(100)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    assert len(items) == 300
    slow_s3.set_faults(every=3)   # every 3rd DeleteObjects answers 503 SlowDown
    progress = Progress()
    settings = DeleteSettings(batch_size=batch, requests_in_flight=4, **FAST_RETRY)
    with caplog.at_level(logging.WARNING, logger="statekeeper.gc.deleter"):
        results = list(Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"], settings, progress).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 300}
    assert slow_s3.injected > 0
    assert progress.retries == slow_s3.injected          # one retry per injected request-level 503
    assert sum(r.retries for r in results) == batch * slow_s3.injected   # each retried batch: `batch` keys
    assert remaining_keys(s3_config, s3_bucket) == set()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= slow_s3.injected

    # Random 30% of listings, HEADs and deletes, seeded: still all deleted, every retry counted. (Listings and
    # HEADs are the re-check's: the listing mode, for S3-compatible stores that ignore the per-key ETag.)
    # 20 directories (20 re-check listings) of 3 keys: 6 delete batches, as 30 keys each in batches of 100 were.
    put_keys(s3_config, s3_bucket, [f"cp/job3/chk-{n}/k{i:03d}" for n in range(20) for i in range(3)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    before = slow_s3.injected
    slow_s3.set_faults(share=0.3, seed=11, kinds={"delete", "list", "head"})
    progress = Progress()
    results = list(Deleter(slow_s3.config.with_overrides(delete_recheck="listing"), [f"s3://{s3_bucket}/cp"],
                           settings, progress).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 60}
    assert slow_s3.injected > before and progress.retries == slow_s3.injected - before


def test_s3_retries_exhausted_fail_with_the_code(s3_config: StorageConfig, s3_bucket: str, slow_s3,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    put_keys(s3_config, s3_bucket, [f"cp/job1/shared/k{i}" for i in range(10)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    enforcement = proven(slow_s3.config, f"s3://{s3_bucket}/cp")
    slow_s3.set_faults(share=1.0)
    progress = Progress()
    settings = DeleteSettings(max_attempts=3, requests_in_flight=1, **FAST_RETRY)
    with caplog.at_level(logging.WARNING, logger="statekeeper.gc.deleter"):
        results = list(Deleter(slow_s3.config, [f"s3://{s3_bucket}/cp"], settings, progress,
                               enforcement=enforcement).run(items))
    assert {r.outcome for r in results} == {GcOutcome.FAILED}
    assert all("SlowDown" in r.message and "after 3 attempt(s)" in r.message and r.retries == 2 for r in results)
    assert slow_s3.injected == 3 and progress.retries == 2
    # One warning for the episode, not one per key or per retry.
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert len(remaining_keys(s3_config, s3_bucket)) == 10


# -- GCS and Azure: re-check, then a delete conditional on the planned version ------------------------


class Versioned:
    """One emulator store for the deleter tests: its config, a root, and writes/listings through its FileIO."""

    def __init__(self, kind: str, config: StorageConfig, root: str) -> None:
        self.kind, self.config, self.root = kind, config, root
        self.fileio = RoutingFileIO(config)
        self.enforcement = proven(config, root)   # before a test fakes the store's delete calls

    def put(self, path: str, body: bytes = b"chunk") -> PlannedDelete:
        return planned(self.fileio.write(f"{self.root}/{path}", body))

    def plan(self, path: str = "", order: int = 1) -> list[PlannedDelete]:
        return [planned(i, order) for i in self.fileio.list(f"{self.root}/{path}".rstrip("/"))]

    def remaining(self) -> set[str]:
        return {i.uri for i in self.fileio.list(self.root)}

    def deleter(self, settings: DeleteSettings = DeleteSettings(), progress: Progress | None = None,
                **config) -> Deleter:
        return Deleter(self.config.with_overrides(**config) if config else self.config, [self.root], settings, progress,
                       enforcement=self.enforcement)


@pytest.fixture(params=[pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)])
def versioned(request) -> Versioned:
    if request.param == "gcs":
        return Versioned("gcs", request.getfixturevalue("gcs_config"), f"gs://{request.getfixturevalue('gcs_bucket')}/cp")
    container = request.getfixturevalue("azure_container")
    return Versioned("azure", request.getfixturevalue("azure_config"), azure_uri(container, "cp"))


def _fileio_class(store: Versioned) -> type:
    return GcsFileIO if store.kind == "gcs" else AzureFileIO


def test_versioned_deletes_exactly_the_unchanged_planned_objects(versioned: Versioned) -> None:
    store = versioned
    dirs = ["job1/shared", "job1/chk-3", "job2/taskowned"]
    for d in dirs:
        for i in range(12):
            store.put(f"{d}/k{i:03d}", b"AAAA")
    store.put("job1/shared/sub/nested")          # below a candidate directory: never planned, must stay
    store.put("job1/shared-sibling")             # a neighbour sharing the prefix, not the directory
    everything = store.plan()
    keep = {f"{store.root}/job1/shared/sub/nested", f"{store.root}/job1/shared-sibling"} | {
        f"{store.root}/{d}/k{i:03d}" for d in dirs for i in range(0, 12, 4)}
    items = [i for i in everything if i.uri not in keep]
    base = f"{store.root}/job1/shared/k00"
    store.fileio.write(base + "1", b"BBBB")      # rewritten after planning: same size, new generation / ETag
    store.fileio.write(base + "2", b"BBBBBB")    # new size
    store.fileio.delete_many([base + "3"])       # gone
    progress = Progress()
    # Small pages (Azurite pages; the GCS emulator returns one page) and batches smaller than a directory.
    deleter = store.deleter(DeleteSettings(batch_size=5), progress, list_page_size=4)
    results = by_uri(list(deleter.run(items)))
    assert len(results) == len(items) == 27
    assert results[base + "1"].outcome is GcOutcome.CHANGED_SKIPPED and "etag" in results[base + "1"].message
    assert results[base + "2"].outcome is GcOutcome.CHANGED_SKIPPED and "size 4 -> 6" in results[base + "2"].message
    assert results[base + "3"].outcome is GcOutcome.ALREADY_GONE
    assert Counter(r.outcome for r in results.values()) == {GcOutcome.DELETED: 24, GcOutcome.CHANGED_SKIPPED: 2,
                                                            GcOutcome.ALREADY_GONE: 1}
    assert store.remaining() == keep | {base + "1", base + "2"}
    assert store.fileio.read_bytes(base + "1") == b"BBBB"
    assert (progress.files, progress.bytes, progress.retries) == (27, 4 * 24, 0)
    clone = pickle.loads(pickle.dumps(deleter))      # picklable after use: clients are left behind
    assert clone._stores == {} and list(clone.run([])) == []


def test_versioned_recheck_lists_directories_and_reads_single_candidates(versioned: Versioned, monkeypatch) -> None:
    store = versioned
    for i in range(10):
        store.put(f"job1/shared/k{i:02d}")
    store.put("job1/chk-1/_metadata")
    items = store.plan()
    cls = _fileio_class(store)   # the listing re-check reads through the FileIO's list_page and stat
    calls: Counter = Counter()
    for name in ("list_page", "stat"):
        original = getattr(cls, name)

        def counted(self, *args, _original=original, _name=name):
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(cls, name, counted)
    results = list(store.deleter(list_page_size=4, delete_recheck="listing").run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 11}
    # shared/: pages of 4 on Azurite (10 objects: 3 pages), one page on the GCS emulator; chk-1/: one read.
    assert calls == {"list_page": 3 if store.kind == "azure" else 1, "stat": 1}


def test_versioned_wrong_spellings_missing_versions_and_outside_roots_fail(versioned: Versioned, tmp_path: Path) -> None:
    store = versioned
    item = store.put("job1/shared/k1")
    other = store.put("job1/shared/k2")
    outside = planned(store.fileio.write(store.root.rsplit("/", 1)[0] + "/elsewhere/x", b"x"))
    if store.kind == "azure":
        container, _, rest = item.uri[len("abfss://"):].partition("@")
        spelled = f"wasbs://{container}@{rest.replace('.dfs.', '.blob.', 1)}"
    else:
        spelled = "GS://" + item.uri[len("gs://"):]
    wrong = [PlannedDelete(spelled, item.size, item.mtime, item.etag),
             PlannedDelete(item.uri + "/", item.size, item.mtime, item.etag),          # trailing slash
             PlannedDelete(other.uri, other.size, other.mtime, None),                  # no version to pin to
             outside]
    results = list(store.deleter().run(wrong))
    assert [r.outcome for r in results] == [GcOutcome.FAILED] * 4
    assert "is not spelled as the index lists objects" in results[0].message
    assert "is not spelled as the index lists objects" in results[1].message
    assert "cannot be made conditional" in results[2].message
    assert "outside the configured roots" in results[3].message
    assert all("not deleted" in r.message for r in results)
    assert {item.uri, other.uri, outside.uri} <= store.remaining() | {outside.uri}
    assert store.fileio.exists(outside.uri)


def test_versioned_object_changed_between_recheck_and_delete_is_kept(versioned: Versioned, monkeypatch) -> None:
    """The re-check passes, then the object is rewritten (same size) or removed before the delete arrives:
    only the store's precondition can tell, and it keeps the new version."""
    store = versioned
    items = [store.put(f"job1/shared/k{i}", b"AAAA") for i in range(6)]
    rewritten, removed = items[1].uri, items[2].uri
    cls = _fileio_class(store)
    original = cls.delete_if_unchanged
    seen_calls = []

    def race(self, pairs):
        if not seen_calls:   # once, after every re-check of this run and before its first delete
            store.fileio.write(rewritten, b"BBBB")
            store.fileio.delete_many([removed])
        seen_calls.append(len(pairs))
        return original(self, pairs)

    monkeypatch.setattr(cls, "delete_if_unchanged", race)
    results = by_uri(list(store.deleter(delete_recheck="listing").run(items)))
    assert seen_calls == [6]   # one batch: the re-check had verified all six
    assert results[rewritten].outcome is GcOutcome.CHANGED_SKIPPED
    assert "changed between the re-check and the delete" in results[rewritten].message
    assert "412" in results[rewritten].message and "etag" in results[rewritten].message
    assert results[removed].outcome is GcOutcome.ALREADY_GONE
    assert Counter(r.outcome for r in results.values())[GcOutcome.DELETED] == 4
    assert store.remaining() == {rewritten} and store.fileio.read_bytes(rewritten) == b"BBBB"


def _transient(kind: str) -> Exception:
    """A whole-request 503 as each FileIO raises it (a StorageError caused by the client's error)."""
    from statekeeper.storage import StorageError

    if kind == "gcs":
        from google.api_core.exceptions import ServiceUnavailable

        cause: Exception = ServiceUnavailable("backend unavailable")
    else:
        from azure.core.exceptions import HttpResponseError

        cause = HttpResponseError(message="Server busy")
        cause.status_code = 503
    try:
        raise StorageError("batch delete failed") from cause
    except StorageError as exc:
        return exc


def test_versioned_throttling_is_retried_with_backoff_and_counted(versioned: Versioned, monkeypatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    store = versioned
    items = [store.put(f"job1/shared/k{i}") for i in range(8)]
    cls = _fileio_class(store)
    original = cls.delete_if_unchanged
    calls: list[int] = []

    def flaky(self, pairs):
        calls.append(len(pairs))
        if len(calls) == 1:
            raise _transient(store.kind)           # the whole request: one retry
        if len(calls) == 2:                         # the first object throttled, the others deleted
            throttled = ConditionalDelete(pairs[0][0], ConditionalOutcome.FAILED, 429, "rateLimitExceeded",
                                          "slow down", retriable=True)
            return [throttled, *original(self, pairs[1:])]
        return original(self, pairs)

    monkeypatch.setattr(cls, "delete_if_unchanged", flaky)
    progress = Progress()
    with caplog.at_level(logging.WARNING, logger="statekeeper.gc.deleter"):
        results = list(store.deleter(DeleteSettings(**FAST_RETRY), progress).run(items))
    assert Counter(r.outcome for r in results) == {GcOutcome.DELETED: 8}
    assert calls == [8, 8, 1]
    assert progress.retries == 2                    # one request retry, then one key retry
    assert sorted(r.retries for r in results) == [1] * 7 + [2]
    assert store.remaining() == set()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1   # one throttling episode

    # Exhausted: FAILED with the code, never deleted.
    items = [store.put(f"job1/shared/z{i}") for i in range(3)]
    monkeypatch.setattr(cls, "delete_if_unchanged", lambda self, pairs: (_ for _ in ()).throw(_transient(store.kind)))
    results = list(store.deleter(DeleteSettings(max_attempts=3, **FAST_RETRY)).run(items))
    assert {r.outcome for r in results} == {GcOutcome.FAILED}
    assert all("503" in r.message and "after 3 attempt(s)" in r.message and r.retries == 2 for r in results)
    assert len(store.remaining()) == 3


def test_versioned_rate_limit_and_delete_order(versioned: Versioned, monkeypatch) -> None:
    store = versioned
    meta = store.put("job1/chk-9/_metadata")
    later = [store.put(f"job1/chk-9/f{i:02d}") for i in range(30)]
    cls = _fileio_class(store)
    original = cls.delete_if_unchanged
    batches: list[int] = []

    def counted(self, pairs):
        batches.append(len(pairs))
        return original(self, pairs)

    monkeypatch.setattr(cls, "delete_if_unchanged", counted)
    items = [PlannedDelete(i.uri, i.size, i.mtime, i.etag, 1) for i in later[:15]]
    items += [PlannedDelete(meta.uri, meta.size, meta.mtime, meta.etag, 0)]
    items += [PlannedDelete(i.uri, i.size, i.mtime, i.etag, 1) for i in later[15:]]
    results = store.deleter(DeleteSettings(max_deletes_per_second=12, requests_in_flight=2)).run(items)
    head = next(results)
    # `_metadata` (order 0) is gone before any order-1 object is touched.
    assert head.uri == meta.uri and head.outcome is GcOutcome.DELETED
    assert len(store.remaining()) == 30
    rest = list(results)
    assert Counter(r.outcome for r in rest) == {GcOutcome.DELETED: 30}
    # A limit below the store's batch size shrinks batches to one second's worth: 30 objects at 12/s.
    assert batches == [1, 12, 12, 6]
    assert store.remaining() == set()


# -- OSS through the S3 path ---------------------------------------------------------------------------


def test_oss_goes_through_the_s3_path_with_its_own_client(s3_config: StorageConfig) -> None:
    """The session's S3 server (SeaweedFS) stands in for OSS's S3-compatible endpoint (path style)."""
    from tests.plugins.s3 import make_bucket

    config = StorageConfig(oss_endpoint=s3_config.endpoint, oss_access_key_id=s3_config.access_key_id,
                           oss_access_key_secret=s3_config.secret_access_key, oss_path_style=True)
    bucket = make_bucket(config.oss_s3_config())
    fio = RoutingFileIO(config)
    for i in range(6):
        fio.write(f"oss://{bucket}/cp/job1/shared/k{i}", b"AAAA")
    items = [planned(i) for i in fio.list(f"oss://{bucket}/cp")]
    fio.write(f"oss://{bucket}/cp/job1/shared/k1", b"BBBB")
    fio.delete_many([f"oss://{bucket}/cp/job1/shared/k2"])
    alias = PlannedDelete(f"oss://{bucket}/cp/job1/shared/k3/", items[3].size, items[3].mtime, items[3].etag)
    results = by_uri(list(Deleter(config, [f"oss://{bucket}/cp"]).run(items + [alias])))
    uri = f"oss://{bucket}/cp/job1/shared/k"
    assert results[uri + "1"].outcome is GcOutcome.CHANGED_SKIPPED
    assert results[uri + "2"].outcome is GcOutcome.ALREADY_GONE
    assert results[alias.uri].outcome is GcOutcome.FAILED and "not spelled" in results[alias.uri].message
    assert Counter(r.outcome for r in results.values())[GcOutcome.DELETED] == 4
    assert {i.uri for i in fio.list(f"oss://{bucket}/cp")} == {uri + "1"}


def test_timestamps_cross_to_and_from_arrow_as_the_same_instants():
    """The GC's tasks convert a plan's mtimes and their outcomes' times through microseconds (pyarrow's own
    conversion of zoned values costs more than the rest of a row): the same aware UTC instants, whatever zone
    the column is labelled with, and nulls."""
    from datetime import datetime, timezone

    import pyarrow as pa

    from statekeeper.tables.arrow_codec import utc_datetimes, utc_timestamps

    instants = [datetime(2026, 3, 1, 2, 3, 4, 567891, tzinfo=timezone.utc), None,
                datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=timezone.utc), datetime(2038, 1, 19, tzinfo=timezone.utc)]
    for zone in ("UTC", "Europe/Berlin", "America/Los_Angeles"):
        column = pa.array(instants, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us", tz=zone))
        got = utc_datetimes(column)
        assert got == instants
        assert all(value is None or value.utcoffset().total_seconds() == 0 for value in got)
    assert utc_timestamps(instants).to_pylist() == instants


def test_routing_deletes_the_listed_spelling_under_its_root_and_refuses_every_other():
    """The roots guard (`Deleter._route`) per spelling: canonical bucket-store URIs, routed without normalize_uri,
    keep their key byte for byte; every other spelling takes the general path and is refused or re-spelled as
    before. Nothing here reaches a store."""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    # Given: both stores refuse a delete pinned to another version (what their self-tests would have proven).
    given = {(store_identity(StorageConfig(), root), Guard.CONDITIONAL_DELETE):
             Proof(store_identity(StorageConfig(), root), Guard.CONDITIONAL_DELETE, Verdict.ENFORCED, "given")
             for root in ("s3://b/cp", "gs://g/ck")}
    deleter = Deleter(StorageConfig(), ["s3://b/cp", "gs://g/ck"],
                      enforcement=Enforcement(StorageConfig(), proofs=given))
    routed = {"s3://b/cp/job/shared/a": "s3://b/cp/job/shared/a",
              "s3://b/cp/job/shared/a b%20c//d": "s3://b/cp/job/shared/a b%20c//d",   # a key's own characters
              "s3a://b/cp/job/shared/x": "s3://b/cp/job/shared/x",                    # an alias, the listed key
              "gs://g/ck/job/shared/a": "gs://g/ck/job/shared/a"}
    refused = {"s3://b/cp/job/shared/y/": "not spelled as the index lists S3 objects",
               "s3://b/cp": "is the root s3://b/cp itself",
               "s3://b/cp/": "is the root s3://b/cp itself",
               "s3://b/cpx/job/z": "lies outside the configured roots",
               "s3://other/cp/job/z": "lies outside the configured roots",
               "GS://g/ck/job/shared/b": "not spelled as the index lists objects",
               "s3://b/cp/job/shared/no-etag": "the plan has no ETag for it",
               "gs://g/ck/job/shared/no-generation": "is not a GCS generation"}
    etags = {"s3://b/cp/job/shared/no-etag": None, "gs://g/ck/job/shared/no-generation": "abc"}
    items = [PlannedDelete(uri, 1, now, etags.get(uri, "7" if uri.lower().startswith("gs") else "e1"), 1)
             for uri in [*routed, *refused]]

    result = deleter._route(items)

    keys = {k.items[0].uri: (k.uri, k.container, k.lane) for keys in result.stores.values() for k in keys.values()}
    assert keys == {planned: (norm, norm[:norm.index("/", 5)], norm[:norm.index("/", norm.index("/", 5) + 1)]
                              + "/job") for planned, norm in routed.items()}
    why = {r.uri: r.message for r in result.refused}
    assert why.keys() == refused.keys() and all(r.outcome is GcOutcome.FAILED for r in result.refused)
    assert all(refused[uri] in message for uri, message in why.items()), why


def test_local_routing_takes_the_listed_path_and_normalizes_every_other_spelling(tmp_path: Path) -> None:
    """Each spelling of a local file lands on the path (or the refusal) that normalizing it gives: canonical ones,
    which normalize_uri answers without taking them apart, and every other. Nothing here touches the files."""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    base = f"file://{tmp_path}/cp"
    deleter = Deleter(StorageConfig(), [str(tmp_path / "cp")])
    routed = {f"{base}/job/shared/a": f"{tmp_path}/cp/job/shared/a",                   # as listings spell it
              f"{base}/job/shared/a b%20c": f"{tmp_path}/cp/job/shared/a b%20c",       # a name's own characters
              f"{base}/job//shared/b": f"{tmp_path}/cp/job/shared/b",
              f"{base}/job/./shared/c": f"{tmp_path}/cp/job/shared/c",
              f"{base}/job/x/../shared/d": f"{tmp_path}/cp/job/shared/d",
              f"{base}/job/shared/e/": f"{tmp_path}/cp/job/shared/e",
              f"file:{tmp_path}/cp/job/shared/f": f"{tmp_path}/cp/job/shared/f",
              f"file://localhost{tmp_path}/cp/job/shared/g": f"{tmp_path}/cp/job/shared/g",
              f"{base}/job/shared/sst-\x00ff": f"{tmp_path}/cp/job/shared/sst-\udcff"}
    refused = {base: "is the root", f"{base}/": "is the root",
               f"{base}/job/../../elsewhere/h": "lies outside the configured roots",
               f"{base}x/job/i": "lies outside the configured roots",
               f"file://{tmp_path}/other/j": "lies outside the configured roots"}
    items = [PlannedDelete(uri, 1, now, "e1", 1) for uri in [*routed, *refused]]

    result = deleter._route(items)

    assert {i.item.uri: i.path for i in result.local} == routed
    assert all(i.root.uri == base and i.lane == f"{base}/job" for i in result.local)
    why = {r.uri: r.message for r in result.refused}
    assert why.keys() == refused.keys() and all(r.outcome is GcOutcome.FAILED for r in result.refused)
    assert all(refused[uri] in message for uri, message in why.items()), why


def test_tasks_running_at_once_share_each_prefixs_starting_rate(s3_config: StorageConfig, s3_bucket: str) -> None:
    # GC spreads a prefix's keys over the tasks that run at once (statekeeper.gc.execute.placed): each starts the
    # prefix at its share of S3's 3,500 writes/s, so that together they start at S3's rate, not a multiple of it.
    put_keys(s3_config, s3_bucket, [f"cp/job1/shared/k{i:03d}" for i in range(20)])
    items = plan_s3(s3_config, f"s3://{s3_bucket}/cp")
    deleter = Deleter(s3_config, [f"s3://{s3_bucket}/cp"], DeleteSettings(tasks_at_once=4))
    assert Counter(r.outcome for r in deleter.run(items)) == {GcOutcome.DELETED: 20}
    (report,) = deleter.prefix_report()
    assert report.lane == f"s3://{s3_bucket}/cp/job1" and report.start_rate == 3500 / 4
    with pytest.raises(ValueError, match="tasks_at_once"):
        DeleteSettings(tasks_at_once=0)
