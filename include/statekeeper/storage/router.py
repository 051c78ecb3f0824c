"""A FileIO that routes each URI to the backend for its scheme."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.config import StorageConfig
from statekeeper.storage.errors import UnsupportedSchemeError
from statekeeper.storage.local import LocalFileIO
from statekeeper.storage.model import DeleteReport, FileInfo
from statekeeper.uri import normalize_uri

_ROUTE_BATCH = 1000


def scheme_of(uri: str) -> str:
    """The scheme of `uri`'s canonical spelling (`s3a` -> `s3`, `wasbs` -> `abfss`). Raises ValueError for what
    normalize_uri refuses (a remote `file://` host, a bucket-less `s3:///`, `..` above `/`)."""
    return normalize_uri(uri).partition(":")[0]


SUPPORTED_SCHEMES = ("file://", "s3:// (s3a/s3n/s3p alias s3)", "oss:// (through its S3 API)", "gs://",
                     "abfss:// (also abfs, wasb, wasbs)")


class RoutingFileIO(FileIO):
    """Dispatches on the URI scheme: `file` → LocalFileIO, `s3` (and aliases) → S3FileIO, `oss` → S3FileIO
    on the OSS endpoint, `gs` → GcsFileIO, Azure (`abfss`, the canonical spelling of abfs/wasb/wasbs) →
    AzureFileIO. Each client library is imported only when its scheme is used."""

    scheme = "*"

    def __init__(self, config: StorageConfig | None = None) -> None:
        self.config = config or StorageConfig()
        self._backends: dict[str, FileIO] = {}

    def __getstate__(self) -> dict[str, object]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["config"])  # type: ignore[misc, arg-type]

    def __repr__(self) -> str:
        return f"RoutingFileIO({self.config!r})"

    def backend(self, uri: str) -> FileIO:
        scheme = scheme_of(uri)
        found = self._backends.get(scheme)
        if found is None:
            if scheme == "file":
                found = LocalFileIO()
            elif scheme == "s3":
                from statekeeper.storage.s3 import S3FileIO  # boto3 only when S3 is used

                found = S3FileIO(self.config)
            elif scheme == "oss":
                from statekeeper.storage.s3 import S3FileIO

                found = S3FileIO(self.config.oss_s3_config(), uri_scheme="oss")
            elif scheme == "gs":
                from statekeeper.storage.gcs import GcsFileIO

                found = GcsFileIO(self.config)
            elif scheme == "abfss":
                from statekeeper.storage.azure import AzureFileIO

                found = AzureFileIO(self.config)
            elif scheme == "hdfs":
                raise UnsupportedSchemeError(
                    f"no storage backend for {uri!r}: hdfs:// paths are recognized (spelling, roots, references) "
                    "but listing and reading HDFS needs an HDFS client, which Statekeeper does not ship; supported "
                    f"schemes are {', '.join(SUPPORTED_SCHEMES)}"
                )
            else:
                raise UnsupportedSchemeError(
                    f"no storage backend for {uri!r}: supported schemes are {', '.join(SUPPORTED_SCHEMES)}"
                )
            self._backends[scheme] = found
        return found

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        return self.backend(directory).list(directory, recursive=recursive)

    def list_dirs(self, directory: str) -> Iterator[str]:
        return self.backend(directory).list_dirs(directory)

    def stat(self, uri: str) -> FileInfo:
        return self.backend(uri).stat(uri)

    def check_directory(self, directory: str) -> None:
        self.backend(directory).check_directory(directory)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        return self.backend(uri).open_input(uri, info=info)

    def read_bytes(self, uri: str, *, info: FileInfo | None = None) -> bytes:
        return self.backend(uri).read_bytes(uri, info=info)

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        return self.backend(uri).write(uri, data, if_absent=if_absent, durable=durable)

    def make_durable(self, uris: list[str]) -> None:
        by_scheme: dict[str, list[str]] = {}
        for uri in uris:
            by_scheme.setdefault(scheme_of(uri), []).append(uri)
        for batch in by_scheme.values():
            self.backend(batch[0]).make_durable(batch)

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        report = DeleteReport()
        pending: dict[str, list[str]] = {}
        for uri in uris:
            scheme = scheme_of(uri)
            batch = pending.setdefault(scheme, [])
            batch.append(uri)
            if len(batch) >= _ROUTE_BATCH:
                report.extend(self.backend(uri).delete_many(batch))
                pending[scheme] = []
        for batch in pending.values():
            if batch:
                report.extend(self.backend(batch[0]).delete_many(batch))
        return report

    def copy(self, source: str, target: str) -> FileInfo:
        if scheme_of(source) == scheme_of(target):
            return self.backend(source).copy(source, target)
        # Across backends: stream through this process.
        with self.open_input(source) as stream:
            return self.write(target, _Reader(stream))


class _Reader:
    """Adapter so `write` sees a plain binary reader (it only calls read)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)


