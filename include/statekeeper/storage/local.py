"""FileIO for `file://` URIs: local disks and mounted network file systems (NFS)."""
from __future__ import annotations

import errno
import os
import shutil
import stat as stat_mod
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.errors import (
    ObjectExistsError,
    ObjectNotFoundError,
    RootNotFoundError,
    StorageError,
    UnreadableObjectError,
)
from statekeeper.storage.model import DeleteFailure, DeleteReport, FileInfo
from statekeeper.uri import normalize_uri

_COPY_CHUNK = 8 * 1024 * 1024


def local_path(uri: str) -> str:
    """Absolute local path of a `file://` URI (or a bare absolute path)."""
    norm = normalize_uri(uri)
    if not norm.startswith("file://"):
        raise StorageError(f"not a local file URI: {uri!r}")
    return norm[len("file://"):]


def _file_uri(path: str) -> str:
    return "file://" + path


def _info(path: str, st: os.stat_result) -> FileInfo:
    # inode + mtime_ns + size: an atomic replace (new inode) is visible even with equal size/mtime.
    etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
    mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=timezone.utc)
    return FileInfo(_file_uri(path), st.st_size, mtime, etag)


class LocalFileIO(FileIO):
    scheme = "file"

    def list(self, directory: str, *, recursive: bool = True) -> Iterator[FileInfo]:
        # Iterative depth-first walk: no generator chain per directory level, since listing
        # millions of objects is the index's hot path.
        stack = [local_path(directory)]
        while stack:
            path = stack.pop()
            try:
                entries = os.scandir(path)
            except (FileNotFoundError, NotADirectoryError):
                continue  # vanished while listing (Flink deletes chk-N dirs concurrently)
            except OSError as exc:
                raise UnreadableObjectError(f"cannot list {_file_uri(path)}: {exc.strerror or exc}") from exc
            subdirs: list[str] = []
            with entries:
                for entry in entries:
                    try:
                        # Directory symlinks are not followed (loops, escaping the root).
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(entry.path)
                            continue
                        st = entry.stat(follow_symlinks=True)
                    except FileNotFoundError:
                        continue  # deleted between readdir and stat
                    except OSError as exc:
                        raise UnreadableObjectError(
                            f"cannot stat {_file_uri(entry.path)}: {exc.strerror or exc}"
                        ) from exc
                    if stat_mod.S_ISREG(st.st_mode):
                        yield _info(entry.path, st)
            if recursive:
                stack.extend(reversed(subdirs))

    def list_dirs(self, directory: str) -> Iterator[str]:
        root = local_path(directory)
        try:
            with os.scandir(root) as entries:
                names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UnreadableObjectError(f"cannot list {_file_uri(root)}: {exc.strerror or exc}") from exc
        for name in sorted(names):
            yield _file_uri(os.path.join(root, name))

    def check_directory(self, directory: str) -> None:
        path = local_path(directory)
        if not os.path.isdir(path):
            raise RootNotFoundError(
                f"{_file_uri(path)} is not an existing directory (unmounted volume? wrong path?); "
                "refusing to treat it as empty"
            )

    def stat(self, uri: str) -> FileInfo:
        path = local_path(uri)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"{_file_uri(path)} does not exist") from None
        except OSError as exc:
            raise UnreadableObjectError(f"cannot stat {_file_uri(path)}: {exc.strerror or exc}") from exc
        if not stat_mod.S_ISREG(st.st_mode):
            raise ObjectNotFoundError(f"{_file_uri(path)} is not a regular file")
        return _info(path, st)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        path = local_path(uri)
        try:
            stream = open(path, "rb", buffering=256 * 1024)  # noqa: SIM115 - returned to caller
        except FileNotFoundError:
            raise ObjectNotFoundError(f"{_file_uri(path)} does not exist") from None
        except OSError as exc:
            raise UnreadableObjectError(f"cannot open {_file_uri(path)}: {exc.strerror or exc}") from exc
        if info is not None and info.etag is not None:
            current = _info(path, os.fstat(stream.fileno()))
            if current.etag != info.etag:
                stream.close()
                from statekeeper.storage.errors import ObjectChangedError

                raise ObjectChangedError(
                    f"{_file_uri(path)} changed since it was listed (etag {info.etag} -> {current.etag}); "
                    "re-list and retry"
                )
        return stream

    def write(self, uri: str, data: bytes | BinaryIO, *, if_absent: bool = False, durable: bool = True) -> FileInfo:
        path = local_path(uri)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        # Write beside the target, then rename/link: readers never see a partial file.
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as out:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    out.write(data)
                else:
                    shutil.copyfileobj(data, out, _COPY_CHUNK)
                out.flush()
                if durable:
                    os.fsync(out.fileno())
            if if_absent:
                try:
                    os.link(tmp, path)  # atomic create-only
                except FileExistsError:
                    raise ObjectExistsError(f"{_file_uri(path)} already exists") from None
            else:
                os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot write {_file_uri(path)}: {exc.strerror or exc}") from exc
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        return self.stat(path)

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        report = DeleteReport()
        for uri in uris:
            path = local_path(uri)
            try:
                os.unlink(path)
            except FileNotFoundError:
                report.missing.append(_file_uri(path))
            except OSError as exc:
                code = errno.errorcode.get(exc.errno or 0, "EIO")
                report.failed.append(DeleteFailure(_file_uri(path), code, exc.strerror or str(exc)))
            else:
                report.deleted.append(_file_uri(path))
        return report

    def copy(self, source: str, target: str) -> FileInfo:
        src = local_path(source)
        try:
            with open(src, "rb") as stream:
                return self.write(target, stream)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"{_file_uri(src)} does not exist") from None
