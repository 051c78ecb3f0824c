"""The reference_spelling rule (guards.spelling_problems / spelling_blockers) on hand-made `references` rows:
Azure's spellings of one container are one store, genuinely ambiguous spellings still block."""
from __future__ import annotations

import pytest

from statekeeper.gc.guards import Rule, check_equal_schemes, spelling_blockers, spelling_problems
from statekeeper.storage import Roots
from statekeeper.uri import flink_path_uri

ROOTS = ["abfss://cp@acct.dfs.core.windows.net/flink", "gs://gbkt/cp", "s3://sbkt/cp", "oss://obkt/cp"]
BLOB = "cp@acct.blob.core.windows.net/flink/job/shared"
DFS = "cp@acct.dfs.core.windows.net/flink/job/shared"

# stored path (as Flink wrote it into _metadata) -> the problem expected, None for none.
CASES = {
    # Azure: every Hadoop scheme and either host, the host in any case: the same blob, never blocks.
    f"wasbs://{BLOB}/a": None,
    f"wasb://cp@ACCT.blob.core.windows.net/flink/job/shared/b": None,
    f"abfs://{DFS}/c": None,
    f"abfss://{DFS}/d": None,
    f"WASBS://cp@acct.BLOB.core.windows.net/flink/job/shared/e": None,
    # ...but a container in another case is another name (Azure containers are lower case): blocks.
    "abfss://CP@acct.dfs.core.windows.net/flink/job/shared/f": "bucket spelled in another case",
    "wasbs://CP@acct.blob.core.windows.net/flink/job/shared/f2": "bucket spelled in another case",
    f"wasbs://{BLOB}/g/": "trailing slash",
    # Another cloud's account of the same name is another store: outside the roots, not ambiguous.
    "wasbs://cp@acct.blob.core.chinacloudapi.cn/flink/job/shared/h": None,
    # GCS: the scheme's case is no difference, the bucket's is.
    "gs://gbkt/cp/job/shared/i": None,
    "GS://gbkt/cp/job/shared/j": None,
    "gs://GBKT/cp/job/shared/k": "bucket spelled in another case",
    # S3 aliases under an s3:// root block unless accepted.
    "s3a://sbkt/cp/job/shared/l": "scheme alias",
    # A root's bucket under another bucket store's scheme (an S3-compatible API in front of OSS or GCS):
    # the listing can never match it, and it may name the root's objects.
    "s3://obkt/cp/job/shared/m": "another store's scheme",
    "s3a://obkt/cp/job/shared/n": "another store's scheme",
    "s3://gbkt/cp/job/shared/o": "another store's scheme",
    "gs://sbkt/cp/job/shared/p": "another store's scheme",
    "oss://OBKT/cp/job/shared/q": "bucket spelled in another case",
    "oss://obkt/cp/job/shared/r": None,
    # Other buckets, and the same bucket outside the root's path: external references, not ambiguous.
    "s3://elsewhere/cp/job/x": None,
    "s3://obkt/other/job/x": None,
}


def _references(spark, stored_paths: list[str], scope: str = "shared") -> object:
    roots = Roots(ROOTS)
    rows = []
    for i, stored in enumerate(stored_paths):
        file_uri = flink_path_uri(stored)
        root = roots.root_of(file_uri)
        rows.append((f"{ROOTS[0]}/job/chk-{i}/_metadata", stored, file_uri, root.uri if root else None, scope))
    return spark.createDataFrame(rows, "snapshot_uri string, stored_path string, file_uri string, "
                                       "file_root string, scope string")


def test_spelling_problems_per_reference(spark) -> None:
    refs = _references(spark, list(CASES))
    found = {r["stored_path"]: r["problem"] for r in spelling_problems(refs, ROOTS).collect()}
    assert found == {stored: problem for stored, problem in CASES.items() if problem is not None}

    accepted = {r["stored_path"] for r in spelling_problems(refs, ROOTS, ("s3a",)).collect()}
    assert "s3a://sbkt/cp/job/shared/l" not in accepted           # the alias, accepted
    assert "s3a://obkt/cp/job/shared/n" in accepted               # another store: no flag accepts it

    # A file-merging managed directory is stored with its trailing slash.
    managed = _references(spark, [f"wasbs://{BLOB}/"], scope="file_merging_managed_dir")
    assert spelling_problems(managed, ROOTS).count() == 0


def test_spelling_blocker_message_names_the_references_and_the_way_out(spark) -> None:
    assert spelling_blockers(_references(spark, [s for s, p in CASES.items() if p is None]), ROOTS) == []
    [blocker] = spelling_blockers(_references(spark, ["s3://obkt/cp/job/shared/m", f"wasbs://{BLOB}/a"]), ROOTS)
    assert blocker.rule is Rule.REFERENCE_SPELLING
    assert "1 reference(s)" in blocker.message and "s3://obkt/cp/job/shared/m" in blocker.message
    assert "another store's scheme" in blocker.message and "cannot be accepted" in blocker.message


def test_equal_schemes_accepts_only_s3_aliases() -> None:
    assert check_equal_schemes(("S3A", " s3n:// ", "")) == ("s3a", "s3n")
    with pytest.raises(ValueError, match="need no flag"):
        check_equal_schemes(("wasbs",))
    with pytest.raises(ValueError, match="different stores"):
        check_equal_schemes(("oss",))


def test_collect_garbage_refuses_other_equal_schemes_before_spark_starts(tmp_path, caplog) -> None:
    from spark_jobs.collect_garbage import main

    assert main(["--warehouse", str(tmp_path / "warehouse"), "--equal-schemes", "s3a,gs"]) == 2
    assert "--equal-schemes gs: only S3's aliases" in caplog.text
