"""FileIO for `file://` URIs: local disks and mounted network file systems (NFS).

Non-regular objects (symlinks, FIFOs, sockets, devices) are listed as objects of their own with
their `ObjectType`, from lstat: a symlink is never followed (it could lead outside the root, or
in a loop), a FIFO or device is never opened (opening a FIFO for reading blocks). A directory
named `_metadata` is listed as an object too (and still descended), since that is where Flink
writes a file: the index must show it, not silently look past it.

File names that are not valid UTF-8 cannot be stored in the (UTF-8) index tables. Their URIs
spell each byte that is not part of valid UTF-8 as NUL followed by two lowercase hex digits
(`shared/\xff` is `shared/\x00ff`). NUL can never occur in a path, so the spelling is unambiguous
and reversible: `local_path` turns it back into the exact bytes, so the object stays addressable.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat as stat_mod
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, BinaryIO

from statekeeper.storage.base import FileIO
from statekeeper.storage.errors import (
    ObjectChangedError,
    ObjectExistsError,
    NotRegularFileError,
    ObjectNotFoundError,
    RootNotFoundError,
    StorageError,
    UnreadableObjectError,
)
from statekeeper.storage.model import DeleteFailure, DeleteReport, FileInfo, ObjectType
from statekeeper.uri import normalize_uri

_COPY_CHUNK = 8 * 1024 * 1024
_SYNC_ONE_BY_ONE = 32     # more files than this: one os.sync() instead of an fsync each
# Directories listed as objects: names where Flink only ever writes a file.
REPORTED_DIRECTORY_NAMES = frozenset({"_metadata"})
# os.fsdecode maps each undecodable byte 0xXY to the lone surrogate U+DCXY ("surrogateescape").
_SURROGATE = re.compile("[\udc80-\udcff]")
_ESCAPED = re.compile("\x00([89a-f][0-9a-f])")


def local_path(uri: str) -> str:
    """Absolute local path of a `file://` URI (or a bare absolute path), with escaped undecodable
    bytes turned back into the str os functions map to those bytes."""
    norm = normalize_uri(uri)
    if not norm.startswith("file://"):
        raise StorageError(f"not a local file URI: {uri!r}")
    path = norm[len("file://"):]
    if "\x00" in path:
        path = _ESCAPED.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), path)
        if "\x00" in path:
            raise StorageError(f"{uri!r} contains a NUL that is not an escaped byte (NUL + two hex digits >= 80)")
    return path


def file_uri(path: str) -> str:
    """`file://` URI of a local path as os functions return it (undecodable bytes escaped)."""
    if not path.isascii():
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            path = _SURROGATE.sub(lambda m: f"\x00{ord(m.group()) - 0xDC00:02x}", path)
    return "file://" + path


_libc: Any = None


def sync_filesystem(path: str) -> None:
    """Flush the file system holding `path` to stable storage: its files' data, inodes and directory entries, in one
    call (syncfs(2) on Linux; else sync(2), every file system)."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.syncfs  # noqa: B018 - present?
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    os.sync()


def object_type_of(mode: int) -> ObjectType:
    if stat_mod.S_ISREG(mode):
        return ObjectType.FILE
    if stat_mod.S_ISLNK(mode):
        return ObjectType.SYMLINK
    if stat_mod.S_ISDIR(mode):
        return ObjectType.DIRECTORY
    if stat_mod.S_ISFIFO(mode):
        return ObjectType.FIFO
    if stat_mod.S_ISSOCK(mode):
        return ObjectType.SOCKET
    if stat_mod.S_ISBLK(mode) or stat_mod.S_ISCHR(mode):
        return ObjectType.DEVICE
    return ObjectType.OTHER


def _info(path: str, st: os.stat_result) -> FileInfo:
    # inode + mtime_ns + size: an atomic replace (new inode) is visible even with equal size/mtime.
    etag = f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
    mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=timezone.utc)
    kind = ObjectType.FILE if stat_mod.S_ISREG(st.st_mode) else object_type_of(st.st_mode)
    return FileInfo(file_uri(path), st.st_size, mtime, etag, kind)


def _not_regular(path: str, kind: ObjectType) -> str:
    return (f"{file_uri(path)} is a {kind.value}, not a regular file; Statekeeper does not follow symlinks "
            "or open special files inside roots (replace it with the real file, or remove it)")


def symlink_below(base: str, path: str) -> str | None:
    """The first existing component of `path` below directory `base` (both local paths) that is a
    symlink, `path` itself included; None when there is none. `base` itself may be a symlink
    (a root configured through a link is checked on its resolved path instead)."""
    if path == base:
        return None
    rest = path[len(base.rstrip("/")) + 1:] if path.startswith(base.rstrip("/") + "/") else None
    if rest is None:
        raise StorageError(f"{file_uri(path)} is not below {file_uri(base)}")
    current = base.rstrip("/")
    for name in rest.split("/"):
        current = f"{current}/{name}"
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return None  # missing components cannot be links (yet): writes create them
        except OSError as exc:
            raise UnreadableObjectError(f"cannot stat {file_uri(current)}: {exc.strerror or exc}") from exc
        if stat_mod.S_ISLNK(mode):
            return current
    return None


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
                raise UnreadableObjectError(f"cannot list {file_uri(path)}: {exc.strerror or exc}") from exc
            subdirs: list[str] = []
            with entries:
                for entry in entries:
                    try:
                        # follow_symlinks=False everywhere: a symlink is an object of its own.
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(entry.path)
                            if entry.name not in REPORTED_DIRECTORY_NAMES:
                                continue
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted between readdir and stat
                    except OSError as exc:
                        raise UnreadableObjectError(
                            f"cannot stat {file_uri(entry.path)}: {exc.strerror or exc}"
                        ) from exc
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
            raise UnreadableObjectError(f"cannot list {file_uri(root)}: {exc.strerror or exc}") from exc
        for name in sorted(names):
            yield file_uri(os.path.join(root, name))

    def check_directory(self, directory: str) -> None:
        path = local_path(directory)
        if not os.path.isdir(path):
            raise RootNotFoundError(
                f"{file_uri(path)} is not an existing directory (unmounted volume? wrong path?); "
                "refusing to treat it as empty"
            )

    def stat(self, uri: str) -> FileInfo:
        path = local_path(uri)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"{file_uri(path)} does not exist") from None
        except OSError as exc:
            raise UnreadableObjectError(f"cannot stat {file_uri(path)}: {exc.strerror or exc}") from exc
        if not stat_mod.S_ISREG(st.st_mode):
            raise NotRegularFileError(_not_regular(path, object_type_of(st.st_mode)))
        return _info(path, st)

    def open_input(self, uri: str, *, info: FileInfo | None = None) -> BinaryIO:
        path = local_path(uri)
        # lstat first so a FIFO or device is never opened at all; O_NOFOLLOW and O_NONBLOCK close
        # the window in which it could be swapped for a symlink or a FIFO before the open.
        try:
            mode = os.lstat(path).st_mode
            if not stat_mod.S_ISREG(mode):
                raise UnreadableObjectError(_not_regular(path, object_type_of(mode)))
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"{file_uri(path)} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnreadableObjectError(_not_regular(path, ObjectType.SYMLINK)) from exc
            raise UnreadableObjectError(f"cannot open {file_uri(path)}: {exc.strerror or exc}") from exc
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise UnreadableObjectError(_not_regular(path, object_type_of(st.st_mode)))
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            stream = os.fdopen(fd, "rb", buffering=256 * 1024)
        except BaseException:
            os.close(fd)
            raise
        if info is not None and info.etag is not None:
            current = _info(path, st)
            if current.etag != info.etag:
                stream.close()
                raise ObjectChangedError(
                    f"{file_uri(path)} changed since it was listed (etag {info.etag} -> {current.etag}); "
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
                    raise ObjectExistsError(f"{file_uri(path)} already exists") from None
            else:
                os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot write {file_uri(path)}: {exc.strerror or exc}") from exc
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        return self.stat(path)

    def make_durable(self, uris: list[str]) -> None:
        # One fsync per file costs a journal commit each (≈1 ms): thousands of small files written
        # together (compaction's moved payloads, DR copies) are flushed by one sync of their file system
        # instead (syncfs: data, inodes and directory entries; other file systems are left alone).
        if len(uris) > _SYNC_ONE_BY_ONE:
            by_device: dict[int, str] = {}
            for directory in sorted({os.path.dirname(local_path(u)) for u in uris}):
                by_device.setdefault(os.stat(directory).st_dev, directory)
            for directory in by_device.values():
                sync_filesystem(directory)
            return
        dirs = set()
        for uri in uris:
            path = local_path(uri)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            dirs.add(os.path.dirname(path))
        for d in dirs:
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_many(self, uris: Iterable[str]) -> DeleteReport:
        report = DeleteReport()
        for uri in uris:
            path = local_path(uri)
            try:
                os.unlink(path)
            except FileNotFoundError:
                report.missing.append(file_uri(path))
            except OSError as exc:
                code = errno.errorcode.get(exc.errno or 0, "EIO")
                report.failed.append(DeleteFailure(file_uri(path), code, exc.strerror or str(exc)))
            else:
                report.deleted.append(file_uri(path))
        return report

    def copy(self, source: str, target: str) -> FileInfo:
        with self.open_input(source) as stream:  # never through a symlink, never a special file
            return self.write(target, stream)
