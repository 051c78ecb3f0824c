"""Hard-linked copies of fixture files, shared by the benchmarks that build synthetic stores.

Data files are hard links (no space, no copy time); a copy is the fallback where a link cannot
be made (another file system, or the inode's link limit reached).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path) -> int:
    """Mirror `src` at `dst` with hard links; returns the number of files."""
    count = 0
    for dirpath, _dirs, files in os.walk(src):
        target = dst / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            link_or_copy(Path(dirpath) / name, target / name)
            count += 1
    return count


def pad_job_dirs(job_dirs: list[Path], padding: int, progress=None) -> int:
    """Add `padding` objects, spread evenly over the job directories' shared/: hard links of each
    directory's own files under new names (the leftovers of aborted uploads and subsumed
    checkpoints that real stores accumulate). `progress(done)` is called every 50,000 objects."""
    import hashlib

    per_job, extra = divmod(padding, max(1, len(job_dirs)))
    done = 0
    for i, job_dir in enumerate(job_dirs):
        shared = job_dir / "shared"
        seeds = sorted(p for p in shared.iterdir() if p.is_file()) or sorted(job_dir.rglob("*"))
        seeds = [p for p in seeds if p.is_file()]
        for k in range(per_job + (1 if i < extra else 0)):
            target = shared / f"leftover-{hashlib.md5(f'{job_dir.name}/{k}'.encode()).hexdigest()}"
            link_or_copy(seeds[k % len(seeds)], target)
            done += 1
            if progress is not None and done % 50_000 == 0:
                progress(done)
    return done
