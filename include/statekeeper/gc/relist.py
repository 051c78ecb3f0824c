"""`_metadata` written after the index ran, found and parsed just before anything is deleted.

Flink keeps checkpointing while GC plans: a checkpoint completed since the index may reference a
file the plan calls an orphan (an incremental checkpoint reuses older SSTs; a job restored in the
meantime uses another job's `shared/`), and compaction writes `compacted/<dir>/_metadata` snapshots.
So every root is walked again, listing directories only, and a `_metadata` is looked for in every
directory where the layout classifier (`statekeeper.layout.classify`) would call one a snapshot: the
same rules the index applies, not a second list of places, so a placement the classifier learns is
one the re-list sees (`holds_snapshot_metadata`, `may_hold_snapshot_below`). Only the subtrees the
classifier proves can hold no snapshot are skipped: `shared/`, `taskowned/`, the inside of `chk-N/`
and of savepoint directories, which hold nearly all objects. Every `_metadata` the index did not parse
in this version is parsed; its references join the reachable set. One that cannot be parsed blocks
the run. One that vanished before it was read (Flink subsumed it) pins nothing any more and is
counted, not fatal.

All listing and parsing runs in Spark tasks, a root's child directory per row.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from statekeeper.storage import (
    GuardedFileIO,
    NotRegularFileError,
    ObjectNotFoundError,
    Roots,
    RoutingFileIO,
    StorageConfig,
    StorageError,
    SymlinkRefusedError,
)
from statekeeper.layout.classify import holds_snapshot_metadata, may_hold_snapshot_below
from statekeeper.uri import join_uri

FOUND_SCHEMA = pa.schema([pa.field("uri", pa.string()), pa.field("etag", pa.string())])
FOUND_SPARK_SCHEMA = "uri string, etag string"
PARSED_SCHEMA = pa.schema([pa.field("metadata_uri", pa.string()), pa.field("file_uri", pa.string()),
                           pa.field("error", pa.string())])
PARSED_SPARK_SCHEMA = "metadata_uri string, file_uri string, error string"



def _fileio(roots: list[str], storage: StorageConfig) -> GuardedFileIO:
    return GuardedFileIO(RoutingFileIO(storage), Roots(roots))


def _metadata_at(fileio: GuardedFileIO, directory: str) -> tuple[str, str] | None:
    uri = join_uri(directory, "_metadata")
    try:
        info = fileio.stat(uri)
    except (NotRegularFileError, SymlinkRefusedError):
        return uri, ""      # something is there that is not a file we may read: parsing it fails closed
    except ObjectNotFoundError:
        return None
    return info.uri, info.etag or ""


DIRS_SCHEMA = pa.schema([pa.field("dir", pa.string()), pa.field("descend", pa.bool_())])
DIRS_SPARK_SCHEMA = "dir string, descend boolean"


@dataclass
class ListDirs:
    """mapInArrow: rows (dir) of roots -> DIRS_SCHEMA: the root itself (looked at, not descended: its
    children are rows of their own, so one root's walk spreads over tasks) and each child directory."""

    roots: list[str]
    storage: StorageConfig

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fileio = _fileio(self.roots, self.storage)
        for batch in batches:
            dirs: list[str] = []
            descend: list[bool] = []
            for directory in batch.column("dir").to_pylist():
                dirs.append(directory)
                descend.append(False)
                for child in fileio.list_dirs(directory):
                    dirs.append(child)
                    descend.append(True)
            yield pa.RecordBatch.from_arrays([pa.array(dirs, pa.string()), pa.array(descend, pa.bool_())],
                                             schema=DIRS_SCHEMA)


@dataclass
class FindMetadata:
    """mapInArrow: DIRS_SCHEMA rows -> FOUND_SCHEMA: every `_metadata` in `dir` (where the classifier
    calls one there a snapshot) and, when `descend`, anywhere below it that the classifier allows."""

    roots: list[str]
    storage: StorageConfig

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fileio = _fileio(self.roots, self.storage)
        for batch in batches:
            found: list[tuple[str, str]] = []
            descends = batch.column("descend").to_pylist() if "descend" in batch.schema.names else None
            for i, directory in enumerate(batch.column("dir").to_pylist()):
                descend = True if descends is None else bool(descends[i])
                found.extend(self._walk(fileio, directory, descend))
            if found:
                uris, etags = zip(*found, strict=True)
                yield pa.RecordBatch.from_arrays([pa.array(list(uris), pa.string()), pa.array(list(etags), pa.string())],
                                                 schema=FOUND_SCHEMA)

    def _walk(self, fileio: GuardedFileIO, directory: str, descend: bool) -> Iterator[tuple[str, str]]:
        root = fileio.roots.require(directory)
        stack = [(directory, descend)]
        while stack:
            here, below = stack.pop()
            relative = root.relative(here)
            if holds_snapshot_metadata(relative):
                hit = _metadata_at(fileio, here)
                if hit is not None:
                    yield hit
            if not (below and may_hold_snapshot_below(relative)):
                continue
            for child in fileio.list_dirs(here):
                relative_child = root.relative(child)
                if holds_snapshot_metadata(relative_child) or may_hold_snapshot_below(relative_child):
                    stack.append((child, True))


@dataclass
class ParseMetadata:
    """mapInArrow: rows (uri) of new `_metadata` -> PARSED_SCHEMA: one row per referenced file or
    managed directory; a row with `error` for one that cannot be parsed; none for one that vanished."""

    roots: list[str]
    storage: StorageConfig

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from statekeeper.format import MetadataFormatError, extract_references, read_metadata

        fileio = _fileio(self.roots, self.storage)
        for batch in batches:
            rows: list[tuple[str, str | None, str | None]] = []
            for uri in batch.column("uri").to_pylist():
                try:
                    info = fileio.stat(uri)
                    with fileio.open_input(uri, info=info) as stream:
                        refs = extract_references(read_metadata(stream, uri), uri)
                except NotRegularFileError as exc:   # a symlink or special file: not "gone"
                    rows.append((uri, None, f"{type(exc).__name__}: {exc}"[:2000]))
                    continue
                except ObjectNotFoundError:
                    rows.append((uri, None, None))     # subsumed by Flink meanwhile: pins nothing now
                    continue
                except (MetadataFormatError, StorageError, OSError) as exc:
                    rows.append((uri, None, f"{type(exc).__name__}: {exc}"[:2000]))
                    continue
                rows.append((uri, uri, None))           # the `_metadata` itself stays
                rows.extend((uri, f, None) for f in sorted(set(refs.physical_files()) | refs.managed_dirs()))
            if rows:
                cols = list(zip(*rows, strict=True))
                yield pa.RecordBatch.from_arrays([pa.array(list(c), pa.string()) for c in cols], schema=PARSED_SCHEMA)


def new_references(spark, roots: list[str], storage: StorageConfig, indexed_snapshots):
    """PARSED_SCHEMA rows for every `_metadata` the index did not parse in its current version: one
    per file it references (and one naming itself), or one with `error`, or, when it vanished, one
    with neither. `indexed_snapshots` has (uri, metadata_etag) of the plan's cut."""
    from pyspark.sql import functions as F

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    root_rows = spark.createDataFrame([(r,) for r in roots], "dir string").repartition(min(len(roots), parallelism))
    dirs = root_rows.mapInArrow(ListDirs(roots, storage), DIRS_SPARK_SCHEMA).repartition(parallelism * 4)
    found = dirs.mapInArrow(FindMetadata(roots, storage), FOUND_SPARK_SCHEMA)
    known = indexed_snapshots.select(F.col("uri"), F.col("metadata_etag").alias("etag"))
    new = found.join(known, ["uri", "etag"], "left_anti").select("uri").distinct()
    return new.repartition(parallelism).mapInArrow(ParseMetadata(roots, storage), PARSED_SPARK_SCHEMA)
