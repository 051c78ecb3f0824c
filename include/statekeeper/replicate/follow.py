"""Follow mode's discovery: for one job directory, the newest checkpoint Flink completed since its last
verified DR copy, and every object a copy of it needs, read from the store and the codec alone.

The nightly DR copy takes its snapshots from the index, chains and validation; a copy that trails a
running job by minutes cannot wait for them. What it relies on instead:

* Flink writes a checkpoint's `_metadata` last, once every state handle it names is durable (format
  spec §6.1: the JobManager writes it after the TaskManagers' files): `chk-N/_metadata` existing means
  checkpoint N completed. A `chk-N` without one is in progress (or was abandoned) and is passed over
  for the next older directory.
* The codec's references of that `_metadata` are its closure: own exclusive files, its own and other
  jobs' `shared/` (a CLAIM restore, FLINK-24149), segment files (the whole physical file), channel
  state and changelog files; tag-17 managed directories are directories, not objects.
* One non-recursive LIST per directory the closure names gives each object's size and version (the
  copy pins the source to it, statekeeper.storage.transfer), not a HEAD per object.

Fail closed: a `_metadata` the codec cannot parse, an object the closure names that the listing does
not hold (or holds shorter than a handle states, or as a symlink or special file), and a reference outside
every root are each a `FollowProblem` naming the object and what to do; such a checkpoint is never handed to
the copy. No fallback to an older checkpoint happens here: one older than the last verified copy is not worth a
copy, and a newer one that does not parse is something to look at, not to step around.

Pure functions decide (`job_dirs`, `closure_objects`, and `layout.classify.checkpoint_dirs`); `follow_job`
is the storage edge, and it is what one Spark task runs per job directory (nothing of a closure reaches
the driver).
"""
from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from statekeeper.layout.classify import METADATA_NAME, LocationKind, checkpoint_dirs, classify_child
from statekeeper.storage import FileInfo, ObjectNotFoundError, StorageError
from statekeeper.storage.base import FileIO
from statekeeper.uri import is_under


class FollowStatus(StrEnum):
    """What a round found for one job directory."""

    DUE = "due"                        # a completed checkpoint newer than the last verified copy, closure complete
    UP_TO_DATE = "up_to_date"          # its newest completed checkpoint already has a verified copy
    NO_CHECKPOINT = "no_checkpoint"    # no chk-N/_metadata yet (a job that just started, or only savepoints)
    SUBSUMED = "subsumed"              # Flink deleted it while it was read (a newer one completed): next round
    REFUSED = "refused"                # the newest completed checkpoint cannot be copied: `problems` say why


class FollowProblemKind(StrEnum):
    UNPARSEABLE = "unparseable"              # the codec refused the _metadata
    UNREADABLE = "unreadable"                # the store refused a read or a listing
    MISSING_OBJECT = "missing_object"        # the closure names an object the listing does not hold
    SHORT_OBJECT = "short_object"            # listed, but shorter than the handle states
    NOT_REGULAR = "not_regular"              # listed as a symlink or special file (local stores), never followed
    OUTSIDE_ROOTS = "outside_roots"          # a reference below none of the followed roots


@dataclass(frozen=True)
class Completed:
    """A checkpoint Flink completed: its `_metadata` as listed (the version the copy pins)."""

    root: str
    job_dir: str
    checkpoint_id: int
    metadata: FileInfo

    @property
    def metadata_uri(self) -> str:
        return self.metadata.uri


@dataclass(frozen=True)
class ClosureObject:
    """One object a copy needs: where it is, its size and version as listed."""

    uri: str
    size: int
    etag: str | None


@dataclass(frozen=True)
class FollowProblem:
    kind: FollowProblemKind
    uri: str            # the object at fault (the _metadata, or the object it names)
    message: str        # what happened and what to do


@dataclass(frozen=True)
class JobFollow:
    """One job directory's answer for this round."""

    root: str
    job_dir: str
    status: FollowStatus
    completed: Completed | None = None
    objects: tuple[ClosureObject, ...] = ()
    problems: tuple[FollowProblem, ...] = field(default_factory=tuple)
    # The `_metadata` bytes that were parsed (up to HELD_METADATA_MAX): the copy rewrites these instead of reading
    # the source again, so a checkpoint Flink subsumes during the round is still published when its objects
    # outlive it (incremental RocksDB: its shared/ files are the newer checkpoint's too; chk-N/ held _metadata only).
    metadata_body: bytes | None = field(default=None, repr=False)


# Larger `_metadata` (inline state at scale) is streamed, not held: the copy then reads it again at the end.
HELD_METADATA_MAX = 32 * 1024 * 1024


def job_dirs(root: str, child_dirs: Iterable[str]) -> tuple[list[str], list[str]]:
    """The job directories (32-hex job ids) among a root's child directories, and the flat-layout
    checkpoint directories (chk-N, shared, taskowned written straight into the root), which follow mode
    does not take: a root with those is named, not silently passed over."""
    jobs, flat = [], []
    for uri in child_dirs:
        name = uri.rstrip("/").rpartition("/")[2]
        kind = classify_child(name)
        if kind is LocationKind.JOB:
            jobs.append(name)
        elif kind is LocationKind.FLAT_CHECKPOINT:
            flat.append(name)
    return sorted(jobs), sorted(flat)


def closure_objects(named: Mapping[str, int], listed: Mapping[str, FileInfo], roots: Iterable[str],
                    metadata_uri: str) -> tuple[list[ClosureObject], list[FollowProblem]]:
    """The objects a copy of `metadata_uri` needs, from what its handles name (uri -> the size they state)
    and the listings of their directories; a problem for each one outside the roots, missing or short."""
    roots = [r.rstrip("/") for r in roots]
    objects, problems = [], []
    for uri in sorted(named):
        stated = named[uri]
        if not any(is_under(uri, r) for r in roots):
            problems.append(FollowProblem(
                FollowProblemKind.OUTSIDE_ROOTS, uri,
                f"{metadata_uri} names {uri}, below none of the followed roots {roots}: add its root to the "
                "DR copy's roots (and its target to the mapping), or copy this job with the nightly DR run"))
            continue
        info = listed.get(uri)
        if info is None:
            problems.append(FollowProblem(
                FollowProblemKind.MISSING_OBJECT, uri,
                f"{metadata_uri} names {uri}, which its directory's listing does not hold: the checkpoint was "
                "subsumed (the next round takes the newer one) or the object was lost (run validation)"))
        elif not info.object_type.is_regular:
            # Before the size: a symlink's listed size is its target path's length, which says nothing of the data.
            problems.append(FollowProblem(
                FollowProblemKind.NOT_REGULAR, uri,
                f"{metadata_uri} names {uri}, which is a {info.object_type.value}, not a regular file: Statekeeper "
                "never follows symlinks or copies special files inside roots; put the real file in its place"))
        elif stated is not None and info.size < stated:
            problems.append(FollowProblem(
                FollowProblemKind.SHORT_OBJECT, uri,
                f"{metadata_uri} states {stated} bytes of {uri}, which holds {info.size}: a truncated object; "
                "run validation over this job before trusting any copy of it"))
        else:
            objects.append(ClosureObject(uri, info.size, info.etag))
    return objects, problems


def newest_completed(fileio: FileIO, root: str, job_dir: str) -> Completed | None:
    """The job's newest `chk-N` whose `_metadata` exists, stat'ed (one LIST of the job directory, then a
    stat per checkpoint directory from the newest down until one has its `_metadata`)."""
    location = f"{root.rstrip('/')}/{job_dir}"
    for checkpoint_id, directory in checkpoint_dirs(location, fileio.list_dirs(location)):
        try:
            info = fileio.stat(f"{directory}/{METADATA_NAME}")
        except ObjectNotFoundError:
            continue     # in progress, or abandoned: Flink writes _metadata last
        return Completed(root.rstrip("/"), job_dir, checkpoint_id, info)
    return None


@dataclass(frozen=True)
class FirstLook:
    """The cheap first look of a round at one job directory (`first_look`)."""

    root: str
    job_dir: str
    newest: int | None = None      # its newest completed checkpoint (None: none yet, or the look failed)
    published: bool = False        # that checkpoint's rewritten `_metadata` is at the target
    failed: bool = False           # a store error: the discovery looks again and names it

    @property
    def unpublished(self) -> bool:
        """Worth a closer look before anything is read from dr_copies: a round where no job is ends there."""
        return self.failed or (self.newest is not None and not self.published)

    def due_after(self, last_copied: int | None) -> bool:
        """Worth the discovery, given the checkpoint id of the job's newest recorded verified copy. A published
        checkpoint with no record (a round killed between publishing it and committing its dr_copies row) is due
        again: its copy then skips every object and records it."""
        return self.failed or (self.newest is not None and (last_copied is None or self.newest > last_copied))


def first_look(source: FileIO, target: FileIO, root: str, job_dir: str, mapping: Mapping[str, str]) -> FirstLook:
    """One delimited LIST and two stats: the newest completed checkpoint, and whether the target already holds its
    `_metadata`. The copy writes that last, after every object of the closure is verified, so a target `_metadata`
    means a verified copy of that checkpoint exists (by any run: nightly and follow write the same path)."""
    from statekeeper.replicate.relocate import target_of

    try:
        completed = newest_completed(source, root, job_dir)
    except StorageError:
        return FirstLook(root, job_dir, failed=True)
    if completed is None:
        return FirstLook(root, job_dir)
    there = target_of(completed.metadata_uri, dict(mapping))
    published = False
    if there is not None:
        try:
            target.stat(there)
            published = True
        except StorageError:     # absent, or unreadable: the discovery decides with dr_copies
            published = False
    return FirstLook(root, job_dir, completed.checkpoint_id, published)


def follow_job(fileio: FileIO, roots: Iterable[str], root: str, job_dir: str,
               last_copied: int | None) -> JobFollow:
    """This round's answer for one job directory: nothing new, or the newest completed checkpoint with its
    whole closure listed, or why that checkpoint cannot be copied. `last_copied`: the checkpoint id of the
    job's newest verified DR copy (None: never copied)."""
    from statekeeper.format import MetadataFormatError, extract_references, read_metadata

    roots = list(roots)
    try:
        completed = newest_completed(fileio, root, job_dir)
    except StorageError as exc:
        location = f"{root.rstrip('/')}/{job_dir}"
        return _refused(root, job_dir, None, FollowProblemKind.UNREADABLE, location,
                        f"cannot list {location}: {type(exc).__name__}: {exc}; check the store's credentials")
    if completed is None:
        return JobFollow(root, job_dir, FollowStatus.NO_CHECKPOINT)
    if last_copied is not None and completed.checkpoint_id <= last_copied:
        return JobFollow(root, job_dir, FollowStatus.UP_TO_DATE, completed)
    uri = completed.metadata_uri
    body: bytes | None = None
    try:
        with fileio.open_input(uri, info=completed.metadata) as stream:
            if completed.metadata.size <= HELD_METADATA_MAX:
                body = stream.read()
                refs = extract_references(read_metadata(io.BytesIO(body), uri), uri)
            else:
                refs = extract_references(read_metadata(stream, uri), uri)
    except MetadataFormatError as exc:
        return _refused(root, job_dir, completed, FollowProblemKind.UNPARSEABLE, uri,
                        f"{uri} does not parse ({type(exc).__name__}: {exc}); nothing of checkpoint "
                        f"{completed.checkpoint_id} is copied. Inspect it with `statekeeper inspect {uri}`")
    except ObjectNotFoundError:
        return JobFollow(root, job_dir, FollowStatus.SUBSUMED, completed, problems=(FollowProblem(
            FollowProblemKind.MISSING_OBJECT, uri, f"{uri} vanished while read: a newer checkpoint subsumed it"),))
    except (StorageError, OSError) as exc:
        return _refused(root, job_dir, completed, FollowProblemKind.UNREADABLE, uri,
                        f"cannot read {uri}: {type(exc).__name__}: {exc}; the next round reads it again (check the "
                        "store's credentials if this repeats)")
    named = refs.physical_files()
    try:
        listed = _listings(fileio, {u.rpartition("/")[0] for u in named if any(is_under(u, r) for r in roots)})
    except StorageError as exc:
        return _refused(root, job_dir, completed, FollowProblemKind.UNREADABLE, uri,
                        f"cannot list the directories {uri} names: {type(exc).__name__}: {exc}")
    objects, problems = closure_objects(named, listed, roots, uri)
    if problems:
        # Flink deletes a subsumed checkpoint's files and its _metadata: objects gone with their _metadata
        # are the ordinary race with a running job, not a loss.
        gone = any(p.kind is FollowProblemKind.MISSING_OBJECT for p in problems) and not fileio.exists(uri)
        return JobFollow(root, job_dir, FollowStatus.SUBSUMED if gone else FollowStatus.REFUSED, completed,
                         problems=tuple(problems))
    # Tag-17 managed directories are not objects: the `_metadata` rewrite creates them at the target.
    return JobFollow(root, job_dir, FollowStatus.DUE, completed, tuple(objects), metadata_body=body)


def _listings(fileio: FileIO, directories: Iterable[str]) -> dict[str, FileInfo]:
    """Every object directly inside each directory, by URI (one paginated LIST per directory)."""
    out: dict[str, FileInfo] = {}
    for directory in sorted(directories):
        for info in fileio.list(directory, recursive=False):
            out[info.uri] = info
    return out


def _refused(root: str, job_dir: str, completed: Completed | None, kind: FollowProblemKind, uri: str,
             message: str) -> JobFollow:
    return JobFollow(root, job_dir, FollowStatus.REFUSED, completed, problems=(FollowProblem(kind, uri, message),))
