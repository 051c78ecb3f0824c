"""The fail-closed rules: any of them found means no deletion at all in this run.

GC deletes what the index says nothing references, so everything that makes the index's answer
doubtful stops it. The rules are global, not per root: a `_metadata` in one root may reference files
in every other root (CLAIM/LEGACY restores, savepoints), so an unknown reference set anywhere is an
unknown reference set everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from statekeeper.tables.spark import ascii_lower

_EXAMPLES = 10


class Rule(StrEnum):
    INDEX_NOT_SUCCEEDED = "index_not_succeeded"
    INDEX_TOO_OLD = "index_too_old"
    CHAINS_STALE = "chains_stale"
    SNAPSHOT_NOT_OK = "snapshot_not_ok"
    REFERENCE_SPELLING = "reference_spelling"
    NEW_METADATA_UNREADABLE = "new_metadata_unreadable"
    PLAN_NOT_EXECUTABLE = "plan_not_executable"


@dataclass(frozen=True)
class Blocker:
    rule: Rule
    message: str       # names the objects and says what to do

    def __str__(self) -> str:
        return f"{self.rule.value}: {self.message}"


def index_blockers(newest_run: dict[str, Any] | None, cut_run_id: str, cut_finished: datetime,
                   not_before: datetime | None) -> list[Blocker]:
    """The newest index run must be the succeeded one GC reads, and recent enough."""
    out = []
    if newest_run is not None and newest_run["run_id"] != cut_run_id and newest_run["status"] != "succeeded":
        out.append(Blocker(Rule.INDEX_NOT_SUCCEEDED, (
            f"the newest index run {newest_run['run_id']} is {newest_run['status']} (finished "
            f"{newest_run['finished_at']:%Y-%m-%d %H:%M:%S} UTC): its listing is incomplete, and the last succeeded run "
            f"{cut_run_id} may be missing newer snapshots. Fix what its errors name (index_runs.errors) and re-run "
            "index_checkpoints until it succeeds")))
    if not_before is not None and cut_finished < not_before:
        out.append(Blocker(Rule.INDEX_TOO_OLD, (
            f"the newest succeeded index run {cut_run_id} finished at {cut_finished:%Y-%m-%d %H:%M:%S} UTC, before "
            f"{not_before:%Y-%m-%d %H:%M:%S} UTC (--index-not-before): run index_checkpoints first")))
    return out


def chains_blockers(stale: tuple[str, ...], present: bool) -> list[Blocker]:
    if not present:
        return [Blocker(Rule.CHAINS_STALE, "the warehouse has no dependencies table: run compute_chains on the "
                                           "newest index run first")]
    if stale:
        return [Blocker(Rule.CHAINS_STALE, (
            f"the chains tables were computed from another index run ({'; '.join(stale)}): run compute_chains "
            "after the newest index run, then GC"))]
    return []


@dataclass
class _StillThere:
    """mapInArrow: rows (uri, status, error) -> the rows whose object still exists. A `_metadata`
    Flink deleted (subsumed) after the listing was `unreadable` to the index; gone, it pins nothing."""

    roots: list[str]
    storage: Any

    def __call__(self, batches: Any) -> Any:
        from statekeeper.storage import GuardedFileIO, NotRegularFileError, ObjectNotFoundError, Roots, RoutingFileIO

        fileio = GuardedFileIO(RoutingFileIO(self.storage), Roots(self.roots))
        for batch in batches:
            keep = []
            for i, u in enumerate(batch.column("uri").to_pylist()):
                try:
                    fileio.stat(u)
                except NotRegularFileError:       # a symlink or special file: still there
                    keep.append(i)
                except ObjectNotFoundError:       # gone: pins nothing
                    pass
                except Exception:  # noqa: BLE001 - cannot tell: it blocks
                    keep.append(i)
                else:
                    keep.append(i)
            if keep:
                yield batch.take(keep)


def snapshot_blockers(snapshots: Any, roots: list[str], storage: Any) -> list[Blocker]:
    """Every `_metadata` under every root must have parsed: an unparsed one references unknown files.
    One that no longer exists (Flink subsumed it after the listing) does not block."""
    from pyspark.sql import functions as F

    bad = (snapshots.where(F.col("status") != "ok").select("uri", "status", "error")
           .mapInArrow(_StillThere(roots, storage), "uri string, status string, error string"))
    rows = bad.orderBy("uri").limit(_EXAMPLES).collect()
    if not rows:
        return []
    total = bad.count()
    # The codec's message repeats the URI: drop it, so the 200 characters shown are what is wrong (the
    # version of an unknown-version file, the offset and record of a corrupt one).
    named = "; ".join(f"{r['uri']} ({r['status']}: {(r['error'] or '').replace(r['uri'] + ' ', '')[:200]})"
                      for r in rows)
    more = f" and {total - len(rows)} more (snapshots.status)" if total > len(rows) else ""
    return [Blocker(Rule.SNAPSHOT_NOT_OK, (
        f"{total} _metadata cannot be read, so the files they reference are unknown: {named}{more}. Repair or "
        "restore each from a backup, or move it out of the roots if the snapshot is truly dead (a corrupt "
        "checkpoint Flink never completed); then re-index. Nothing is deleted anywhere while one is unreadable"))]


# Azure's Hadoop schemes: one store (normalize_uri maps all of them onto abfss://container@account.dfs...).
_AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs")
# Schemes of `scheme://bucket/key` stores that one bucket can be reached through by another API: OSS and
# GCS serve S3-compatible APIs, so `s3://b/...` may name the objects an `oss://b` or `gs://b` root lists.
_BUCKET_SCHEMES = ("s3", "oss", "gs")
# S3's aliases, the only schemes --equal-schemes accepts (normalize_uri already maps them onto s3://).
S3_ALIASES = ("s3a", "s3n", "s3p")


def spelling_problems(references: Any, roots: list[str], equal_schemes: tuple[str, ...] = ()) -> Any:
    """(snapshot_uri, stored_path, file_uri, problem) of every reference whose stored spelling makes its match
    with the listing doubtful (`problem`: "scheme alias", "another store's scheme", "bucket spelled in another
    case", "trailing slash"); see `spelling_blockers`."""
    from pyspark.sql import functions as F

    stored = F.col("stored_path")
    scheme = ascii_lower(F.regexp_extract(stored, r"^([A-Za-z][A-Za-z0-9+.\-]*)://", 1))
    authority = F.regexp_extract(stored, r"^[A-Za-z][A-Za-z0-9+.\-]*://([^/]*)", 1)
    canonical_scheme = F.regexp_extract(F.col("file_uri"), r"^([a-z0-9+.\-]+)://", 1)
    canonical_authority = F.regexp_extract(F.col("file_uri"), r"^[a-z0-9+.\-]+://([^/]*)", 1)
    canonical_path = F.regexp_extract(F.col("file_uri"), r"^[a-z0-9+.\-]+://[^/]*(/.*)?$", 1)
    accepted = [s.lower() for s in equal_schemes]
    in_root = F.col("file_root").isNotNull()
    outside = F.col("file_root").isNull()
    # Azure: wasb[s]/abfs[s] and the blob/dfs host (in any case: DNS names) reach one blob of one account,
    # so neither the scheme nor the host part of `container@host` can make a reference ambiguous; the
    # container is compared verbatim (a container in another case is another name).
    azure = scheme.isin(*_AZURE_SCHEMES)
    alias = in_root & (scheme != "") & (scheme != canonical_scheme) & (scheme != "file") & ~azure
    if accepted:
        alias = alias & ~scheme.isin(*accepted)
    container = F.regexp_extract(authority, r"^(.*)@[^@]*$", 1)
    canonical_container = F.regexp_extract(canonical_authority, r"^(.*)@[^@]*$", 1)
    case = (scheme != "") & F.when(azure, container != canonical_container).otherwise(authority != canonical_authority)
    lowered = F.concat(canonical_scheme, F.lit("://"), ascii_lower(canonical_authority), canonical_path)
    # Outside every root as spelled, but a root's bucket under another bucket store's scheme: the listing
    # cannot match it whatever it names, and it may name the root's objects (e.g. Flink's s3:// filesystem
    # pointed at an OSS or GCS endpoint), so its files would look unreferenced.
    scheme_free = F.concat(ascii_lower(canonical_authority), canonical_path)
    root_case = F.lit(False)
    other_store = F.lit(False)
    for root in roots:
        root_case = root_case | (outside & lowered.startswith(root.rstrip("/") + "/"))
        root_scheme, _, root_rest = root.partition("://")
        if root_scheme in _BUCKET_SCHEMES:
            other_store = other_store | (outside & canonical_scheme.isin(*_BUCKET_SCHEMES)
                                         & (canonical_scheme != root_scheme)
                                         & scheme_free.startswith(root_rest.lower().rstrip("/") + "/"))
    slash = in_root & stored.endswith("/") & (F.col("scope") != "file_merging_managed_dir")
    problem = (F.when(alias, F.lit("scheme alias"))
               .when(other_store, F.lit("another store's scheme"))
               .when(root_case | (in_root & case), F.lit("bucket spelled in another case"))
               .when(slash, F.lit("trailing slash")))
    return references.select("snapshot_uri", "stored_path", "file_uri", problem.alias("problem")) \
        .where(F.col("problem").isNotNull())


def spelling_blockers(references: Any, roots: list[str], equal_schemes: tuple[str, ...] = ()) -> list[Blocker]:
    """A reference that names a listed object under another spelling is an error, never an orphan.

    Statekeeper reads `s3a://`/`s3n://`/`s3p://` as `s3://` (the same store), but Iceberg deleted live
    files after exactly such a mismatch: unless the alias is accepted (`equal_schemes`), a stored path
    whose scheme is an S3 alias, whose bucket differs in case from a root's, or that ends in `/` blocks; so
    does a root's bucket under another bucket store's scheme (`s3://b/...` with an `oss://b` or `gs://b`
    root, or the reverse), which no flag can accept. Azure's spellings of one account and container
    (`wasb[s]://c@a.blob...`, `abfs[s]://c@a.dfs...`, the host in any case) are one store and never block.
    """
    bad = spelling_problems(references, roots, equal_schemes)
    rows = bad.orderBy("snapshot_uri", "stored_path").limit(_EXAMPLES).collect()
    if not rows:
        return []
    total = bad.count()
    named = "; ".join(f"{r['snapshot_uri']} stores {r['stored_path']!r} ({r['problem']}; listed as {r['file_uri']})"
                      for r in rows)
    more = f" and {total - len(rows)} more" if total > len(rows) else ""
    return [Blocker(Rule.REFERENCE_SPELLING, (
        f"{total} reference(s) spell a location under the roots differently from the listing: {named}{more}. "
        "Configure the roots with the spelling Flink writes; if Flink writes s3a:// (or s3n://, s3p://) for the "
        "same bucket, pass --equal-schemes s3a (Iceberg's equal_schemes) after checking that both spellings reach "
        "the same store. A root's bucket under another store's scheme (s3:// for an oss:// or gs:// root, or the "
        "reverse) cannot be accepted: configure the root with the scheme Flink writes. Azure's wasb://, wasbs://, "
        "abfs:// and abfss:// spellings of one container need nothing"))]


def check_equal_schemes(schemes: tuple[str, ...]) -> tuple[str, ...]:
    """`schemes` for --equal-schemes, normalized (lower case, no `://`); ValueError for anything but an S3
    alias: Azure spellings need no flag, and oss://, gs:// and s3:// are different stores."""
    out = tuple(s.strip().lower().rstrip(":/") for s in schemes if s.strip())
    wrong = [s for s in out if s not in S3_ALIASES]
    if wrong:
        hint = ("Azure's wasb/wasbs/abfs/abfss spellings of one container are the same store and need no flag"
                if all(s in _AZURE_SCHEMES for s in wrong) else
                "oss://, gs:// and s3:// are different stores: configure the roots with the scheme Flink writes")
        raise ValueError(f"--equal-schemes {','.join(wrong)}: only S3's aliases ({', '.join(S3_ALIASES)}) can be "
                         f"accepted as s3://; {hint}")
    return out


def summary(blockers: list[Blocker]) -> str:
    return "; ".join(str(b) for b in blockers)
