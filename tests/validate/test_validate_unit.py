"""Pure validation rules: which evidence about a referenced file is a finding, and how it reads."""
from __future__ import annotations

import pyarrow as pa
import pytest

from statekeeper.storage import Roots, RoutingFileIO, StorageConfig
from statekeeper.storage.roots import GuardedFileIO
from statekeeper.tables.vocabulary import Check
from statekeeper.validate.checks import (
    EVIDENCE_COLUMNS,
    STAT_FOUND,
    STAT_MISSING,
    STAT_OUTSIDE,
    STAT_UNREADABLE,
    FileEvidence,
    file_findings,
    findings_batches,
    worst,
)
from statekeeper.validate.stat import StatTask, stat_one

S = "s3://b/ckpt/j/chk-3/_metadata"
F = "s3://b/ckpt/j/shared/f1"


def ev(**kw) -> FileEvidence:
    base = dict(snapshot_uri=S, file_uri=F, indexed_root=True, listed_size=100, stat_status=None, stat_size=None,
                stat_error=None, extent=100, segmented=False, relative=False, relative_name=None)
    base.update(kw)
    return FileEvidence(**base)


def checks(e: FileEvidence) -> list[str]:
    return [f.check for f in file_findings(e)]


def test_present_and_long_enough_is_fine():
    assert file_findings(ev()) == []
    assert file_findings(ev(listed_size=150)) == []          # longer than stated: sizes are informational
    assert file_findings(ev(extent=None)) == []              # nothing stated (e.g. a directory-sized handle)


def test_missing_absolute_and_relative():
    (f,) = file_findings(ev(listed_size=None))
    assert (f.check, f.severity, f.subject, f.bytes) == (Check.FILE_EXISTS, "error", F, 100)
    assert F in f.detail and "100 bytes stated" in f.detail
    (r,) = file_findings(ev(listed_size=None, relative=True, relative_name="f1", file_uri="s3://b/ckpt/j/chk-3/f1"))
    assert r.check == Check.RELATIVE_RESOLVES and "'f1'" in r.detail and "beside _metadata" in r.detail


def test_too_short_files_and_segments():
    (f,) = file_findings(ev(listed_size=60))
    assert f.check == Check.FILE_SIZE and "60 bytes" in f.detail and "100 bytes" in f.detail
    (s,) = file_findings(ev(listed_size=60, extent=80, segmented=True))
    assert s.check == Check.FILE_SIZE and "ends at byte 80" in s.detail
    assert file_findings(ev(listed_size=80, extent=80, segmented=True)) == []


def test_outside_the_indexed_roots():
    assert file_findings(ev(indexed_root=False, listed_size=None, stat_status=STAT_FOUND, stat_size=100)) == []
    assert checks(ev(indexed_root=False, listed_size=None, stat_status=STAT_FOUND, stat_size=10)) == [Check.FILE_SIZE]
    assert checks(ev(indexed_root=False, listed_size=None, stat_status=STAT_MISSING)) == [Check.FILE_EXISTS]
    (u,) = file_findings(ev(indexed_root=False, listed_size=None, stat_status=STAT_OUTSIDE))
    assert u.check == Check.FILE_UNVERIFIABLE and "--roots" in u.detail
    (x,) = file_findings(ev(indexed_root=False, listed_size=None, stat_status=STAT_UNREADABLE, stat_error="denied"))
    assert x.check == Check.FILE_UNVERIFIABLE and "denied" in x.detail


def test_findings_batches_and_severity():
    rows = [ev(), ev(listed_size=None), ev(listed_size=1)]
    batch = pa.RecordBatch.from_pylist([{c: getattr(r, c) for c in EVIDENCE_COLUMNS} for r in rows])
    out = [b for b in findings_batches([batch])]
    assert [r["check"] for b in out for r in b.to_pylist()] == [Check.FILE_EXISTS, Check.FILE_SIZE]
    assert worst([]) == "ok" and worst(["ok", "warning"]) == "warning" and worst(["warning", "error", "ok"]) == "error"


def test_stat_stays_inside_the_roots(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_bytes(b"12345")
    roots = Roots([str(root)])
    fio = GuardedFileIO(RoutingFileIO(StorageConfig()), roots)
    inside = f"file://{root}/a"
    assert stat_one(fio, roots, inside) == (inside, STAT_FOUND, 5, None)
    assert stat_one(fio, roots, f"file://{root}/b")[1] == STAT_MISSING
    assert stat_one(fio, roots, f"file://{tmp_path}/elsewhere")[1] == STAT_OUTSIDE
    assert stat_one(None, None, inside)[1] == STAT_OUTSIDE
    task = StatTask([str(root)], StorageConfig(), threads=2)
    batch = pa.RecordBatch.from_pylist([{"file_uri": inside}, {"file_uri": f"file://{tmp_path}/x"}])
    (out,) = list(task([batch]))
    assert out.column("stat_status").to_pylist() == [STAT_FOUND, STAT_OUTSIDE]


@pytest.mark.parametrize("segmented", [False, True])
def test_file_size_is_never_reported_for_missing_files(segmented):
    assert checks(ev(listed_size=None, extent=10, segmented=segmented)) == [Check.FILE_EXISTS]


def test_stat_of_an_unresolvable_reference_is_a_finding_not_a_crash(tmp_path):
    """`file:etc/passwd` once became `file://etc/passwd` in `references`; validating such an index
    must report that reference, not exit 3 on Roots.root_of's ValueError."""
    from statekeeper.storage import GuardedFileIO, LocalFileIO, Roots
    from statekeeper.validate.checks import STAT_UNREADABLE
    from statekeeper.validate.stat import stat_one

    roots = Roots([str(tmp_path)])
    uri, status, size, error = stat_one(GuardedFileIO(LocalFileIO(), roots), roots, "file://etc/passwd")
    assert (uri, status, size) == ("file://etc/passwd", STAT_UNREADABLE, None)
    assert "etc/passwd" in error
