"""`_metadata` written after the index ran, found and parsed just before anything is deleted.

Flink keeps checkpointing while GC plans: a checkpoint completed since the index may reference a
file the plan calls an orphan (an incremental checkpoint reuses older SSTs; a job restored in the
meantime uses another job's `shared/`). So every root is listed again, level by level, only where a
`_metadata` can be (`<root>/_metadata`, `<root>/<dir>/_metadata`, `<root>/<dir>/chk-N/_metadata`
and `<root>/chk-N/_metadata`), and every `_metadata` the index did not parse in this version is
parsed; its references join the reachable set. One that cannot be parsed blocks the run. One that
vanished before it was read (Flink subsumed it) pins nothing any more and is counted, not fatal.

All listing and parsing runs in Spark tasks, a directory per row.
"""
from __future__ import annotations

import re
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
from statekeeper.uri import join_uri

_CHK = re.compile(r"^chk-\d+$")

FOUND_SCHEMA = pa.schema([pa.field("uri", pa.string()), pa.field("etag", pa.string())])
FOUND_SPARK_SCHEMA = "uri string, etag string"
PARSED_SCHEMA = pa.schema([pa.field("metadata_uri", pa.string()), pa.field("file_uri", pa.string()),
                           pa.field("error", pa.string())])
PARSED_SPARK_SCHEMA = "metadata_uri string, file_uri string, error string"


def _name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


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


@dataclass
class ListDirs:
    """mapInArrow: rows (dir) -> rows (dir) of the child directories (the roots' job directories)."""

    roots: list[str]
    storage: StorageConfig

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fileio = _fileio(self.roots, self.storage)
        for batch in batches:
            out = []
            for directory in batch.column("dir").to_pylist():
                out.append(directory)           # the root itself: create-subdir=false layouts
                out.extend(fileio.list_dirs(directory))
            yield pa.RecordBatch.from_arrays([pa.array(out, pa.string())], names=["dir"])


@dataclass
class FindMetadata:
    """mapInArrow: rows (dir) -> FOUND_SCHEMA: every `_metadata` in `dir` or in its `chk-N/`."""

    roots: list[str]
    storage: StorageConfig

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fileio = _fileio(self.roots, self.storage)
        for batch in batches:
            found: list[tuple[str, str]] = []
            for directory in batch.column("dir").to_pylist():
                here = _metadata_at(fileio, directory)
                if here is not None:
                    found.append(here)
                for child in fileio.list_dirs(directory):
                    if _CHK.match(_name(child)):
                        hit = _metadata_at(fileio, child)
                        if hit is not None:
                            found.append(hit)
            if found:
                uris, etags = zip(*found, strict=True)
                yield pa.RecordBatch.from_arrays([pa.array(list(uris), pa.string()), pa.array(list(etags), pa.string())],
                                                 schema=FOUND_SCHEMA)


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
    dirs = root_rows.mapInArrow(ListDirs(roots, storage), "dir string").repartition(parallelism * 4)
    found = dirs.mapInArrow(FindMetadata(roots, storage), FOUND_SPARK_SCHEMA)
    known = indexed_snapshots.select(F.col("uri"), F.col("metadata_etag").alias("etag"))
    new = found.join(known, ["uri", "etag"], "left_anti").select("uri").distinct()
    return new.repartition(parallelism).mapInArrow(ParseMetadata(roots, storage), PARSED_SPARK_SCHEMA)
