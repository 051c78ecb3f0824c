"""Job directories nothing has checkpointed into lately, and which live jobs still use their files.

The Kubernetes operator gives a job a new job id on every deployment that is not a last-state upgrade
(FLINK-35831): the next run starts from the old run's retained checkpoint under a new job directory,
and the old directory stays behind with its `shared/` files, some still used by the new run after a
CLAIM or LEGACY restore. Such a directory is *idle*: no checkpoint `_metadata` in it is newer than the
inactivity threshold (the GC's `--inactive-after`), or, with no checkpoint left (a CLAIM restore deleted
it), no object in it is. Its *pinners* are the other job directories whose retained snapshots reference
files in it; a pinner is *live* when it is not idle itself. What nothing pins is what the GC's inactivity
policy (`--inactive-after D --inactive-retain K`) reclaims; what live jobs pin stays, whatever the policy.

`judge` is the rule, on per-directory aggregates: the report aggregates them in Spark
(statekeeper.report.idle), `statekeeper explain --inactive-after` streaming the tables without Spark
(statekeeper.inspect.idle). Pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from statekeeper.layout.classify import LocationKind, classify_child


@dataclass(frozen=True)
class JobActivity:
    """One job directory: its newest checkpoint `_metadata` (None: none left), newest object, size."""

    root: str
    job_dir: str
    newest_checkpoint: datetime | None
    newest_object: datetime | None
    files: int
    bytes: int

    def idle(self, cutoff: datetime) -> bool:
        last = self.newest_checkpoint or self.newest_object
        return last is not None and _utc(last) < _utc(cutoff)


def _utc(when: datetime) -> datetime:
    # Spark collects the tables' UTC timestamps as naive datetimes (its session time zone is UTC).
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


@dataclass(frozen=True)
class Use:
    """Snapshots of (root, job_dir) reference `files` distinct files (`bytes`) of (target_root, target_job_dir)."""

    root: str
    job_dir: str
    target_root: str
    target_job_dir: str
    snapshots: int
    files: int
    bytes: int


@dataclass(frozen=True)
class Pinner:
    root: str
    job_dir: str
    live: bool
    snapshots: int
    files: int
    bytes: int


@dataclass(frozen=True)
class IdleJobDir:
    root: str
    job_dir: str
    newest_checkpoint: datetime | None
    newest_object: datetime | None
    files: int
    bytes: int
    pinned_by: tuple[Pinner, ...]

    @property
    def live_pinners(self) -> tuple[Pinner, ...]:
        return tuple(p for p in self.pinned_by if p.live)


def is_job_directory(job_dir: str) -> bool:
    """Only `<32-hex job id>/` directories: savepoints expire by their own rule, other names are not jobs."""
    return classify_child(job_dir) is LocationKind.JOB


def judge(activity: Iterable[JobActivity], uses: Iterable[Use], cutoff: datetime) -> list[IdleJobDir]:
    """The idle job directories, largest first, each with the directories that use its files (live first)."""
    activity = [a for a in activity if is_job_directory(a.job_dir)]
    by_dir = {(a.root, a.job_dir): a for a in activity}
    idle = {key for key, a in by_dir.items() if a.idle(cutoff)}
    pinners: dict[tuple[str, str], list[Pinner]] = {}
    for u in uses:
        target = (u.target_root, u.target_job_dir)
        if target not in idle or (u.root, u.job_dir) == target:
            continue
        live = (u.root, u.job_dir) not in idle
        pinners.setdefault(target, []).append(Pinner(u.root, u.job_dir, live, u.snapshots, u.files, u.bytes))
    out = [IdleJobDir(a.root, a.job_dir, a.newest_checkpoint, a.newest_object, a.files, a.bytes,
                      tuple(sorted(pinners.get(key, ()), key=lambda p: (not p.live, -p.bytes, p.root, p.job_dir))))
           for key, a in by_dir.items() if key in idle]
    return sorted(out, key=lambda d: (-d.bytes, d.root, d.job_dir))


def render_text(dirs: list[IdleJobDir], cutoff: datetime) -> str:
    from statekeeper.units import human_size

    when = cutoff.strftime("%Y-%m-%d %H:%M UTC")
    if not dirs:
        return f"No job directory without a checkpoint newer than {when}.\n"
    lines = [f"{len(dirs)} job director{'y' if len(dirs) == 1 else 'ies'} with no checkpoint newer than {when} "
             f"({human_size(sum(d.bytes for d in dirs))} in {sum(d.files for d in dirs)} object(s)):"]
    for d in dirs:
        last = d.newest_checkpoint or d.newest_object
        what = "newest checkpoint" if d.newest_checkpoint else "no checkpoint left; newest object"
        lines.append(f"  {d.root}/{d.job_dir}: {d.files} object(s), {human_size(d.bytes)}; {what} "
                     f"{last:%Y-%m-%d %H:%M}")
        if not d.pinned_by:
            lines.append("    nothing references its files: the GC's inactivity policy (--inactive-after) reclaims "
                         "all but its newest checkpoints")
        for p in d.pinned_by:
            lines.append(f"    {'used by live job' if p.live else 'used by idle job'} {p.root}/{p.job_dir}: "
                         f"{p.files} file(s), {human_size(p.bytes)} in {p.snapshots} retained snapshot(s)"
                         + ("" if p.live else " (idle too)"))
    return "\n".join(lines) + "\n"
