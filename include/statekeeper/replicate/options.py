"""What a DR copy run is asked to do: targets, allowlist, selection, verification. Pure values.

The target layout is a map from each source root to one target root; paths below a root are
mirrored, so a file several jobs share (FLINK-24149 chains) is copied once and stays shared. Every
check that needs no tables happens here, before Spark starts: a target outside the allowlist, a target
inside (or around) a source root, two source roots on one target; for local paths also after resolving
symlinks (a target reached through a link into a source root is inside it, whatever it is called).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from statekeeper.errors import ConfigurationError
from statekeeper.storage.roots import resolved_uri
from statekeeper.uri import normalize_uri


class DrOptionsError(ConfigurationError):
    """The DR copy's options are contradictory, unsafe or incomplete."""


class SavepointPolicy(StrEnum):
    """Which savepoints a run copies besides each job's latest restorable checkpoint."""

    NONE = "none"
    NEWEST = "newest"    # the newest restorable savepoint of each job (by job id; else per savepoint root)
    ALL = "all"          # every restorable savepoint


class VerifyMode(StrEnum):
    SIZE = "size"            # every referenced object exists at the target with the source's size
    CHECKSUM = "checksum"    # also: SHA-256 of the target bytes equals the one computed while copying


class DrMode(StrEnum):
    COPY = "copy"        # select, copy, verify, write the rewritten `_metadata` last
    VERIFY = "verify"    # re-verify the newest verified copy of every snapshot at the target; copy nothing
    FOLLOW = "follow"    # each job's newest completed checkpoint since its last verified copy, found in the store


def _overlap(a: str, b: str) -> bool:
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _under(uri: str, prefix: str) -> bool:
    uri, prefix = uri.rstrip("/"), prefix.rstrip("/")
    return uri == prefix or uri.startswith(prefix + "/")


def _canonical(uri: str, what: str) -> str:
    try:
        return normalize_uri(uri.strip()).rstrip("/")
    except ValueError as exc:
        raise DrOptionsError(f"{what} {uri!r} is not an absolute URI (file://, s3://, oss://, gs://, abfss://): {exc}") from None


def _segments(uri: str) -> list[str]:
    scheme, _, rest = uri.partition("://")
    return [scheme, *[p for p in rest.split("/") if p]]


def _below_common_parent(roots: list[str]) -> dict[str, str]:
    """Each root's path below the deepest directory all of them share (at least its last segment):
    s3://b/flink/checkpoints and s3://b/flink/savepoints -> checkpoints, savepoints; roots in two
    buckets keep their bucket names; different schemes keep the scheme too. Distinct roots never
    collide, because nothing but a shared prefix is dropped."""
    if not roots:
        return {}
    parts = {r: _segments(r) for r in roots}
    common = 0
    shortest = min(len(p) for p in parts.values())
    while common < shortest - 1 and len({tuple(p[:common + 1]) for p in parts.values()}) == 1:
        common += 1
    return {r: "/".join(p[common:]) for r, p in parts.items()}


@dataclass(frozen=True)
class TargetSpec:
    """`--target` as given: explicit SOURCE=TARGET pairs and/or one base every other root is mirrored
    below, by its path below the roots' deepest common directory."""

    pairs: tuple[tuple[str, str], ...] = ()
    base: str | None = None

    @classmethod
    def parse(cls, values: list[str]) -> TargetSpec:
        pairs: list[tuple[str, str]] = []
        base = None
        for raw in (v.strip() for group in values for v in group.split(",")):
            if not raw:
                continue
            if "=" in raw:
                src, _, dst = raw.partition("=")
                pairs.append((_canonical(src, "source root"), _canonical(dst, "target root")))
            elif base is None:
                base = _canonical(raw, "target base")
            else:
                raise DrOptionsError(f"two target bases given ({base}, {raw}): give one base, or SOURCE=TARGET pairs")
        return cls(tuple(pairs), base)

    def resolve(self, source_roots: list[str]) -> dict[str, str]:
        """The target root of every source root (DrOptionsError naming a root without one)."""
        roots = [r.rstrip("/") for r in source_roots]
        explicit = dict(self.pairs)
        unknown = sorted(set(explicit) - set(roots))
        if unknown:
            raise DrOptionsError(f"--target names source root(s) {unknown} that the index does not cover "
                                 f"(indexed roots: {roots})")
        out: dict[str, str] = {}
        below = _below_common_parent([r for r in roots if r not in explicit])
        for root in roots:
            if root in explicit:
                out[root] = explicit[root]
            elif self.base is not None:
                out[root] = f"{self.base}/{below[root]}"
            else:
                raise DrOptionsError(f"source root {root} has no target: add --target {root}=<target root>, or "
                                     "a target base (--target <base>) below which every root is mirrored")
        return out


@dataclass(frozen=True)
class DrOptions:
    """Every option of a DR copy run. `check()` refuses unsafe combinations."""

    targets: TargetSpec = field(default_factory=TargetSpec)
    allowed_targets: tuple[str, ...] = ()
    mode: DrMode = DrMode.COPY
    savepoints: SavepointPolicy = SavepointPolicy.NEWEST
    snapshots: tuple[str, ...] = ()          # explicit `_metadata` (or snapshot directory) URIs: only these
    job_filter: str | None = None            # glob on the job directory name
    include_external: bool = False
    verify: VerifyMode = VerifyMode.SIZE
    copies_in_flight: int = 16               # concurrent copies per Spark task
    max_fallbacks: int = 2                   # older restorable checkpoints tried when a copy fails (subsumption)
    max_copies_per_second: float | None = None   # for the whole run, shared by its tasks (None: unlimited)

    def check(self) -> None:
        if not self.targets.pairs and self.targets.base is None:
            raise DrOptionsError("no target given: --target <base> or --target SOURCE_ROOT=TARGET_ROOT")
        if not self.allowed_targets:
            raise DrOptionsError("no target allowlist: pass --allowed-targets (the DAG reads the Variable "
                                 "statekeeper_dr_allowed_targets); a DR copy writes only below an allowed prefix")
        if self.copies_in_flight < 1:
            raise DrOptionsError(f"--copies-in-flight must be >= 1, got {self.copies_in_flight}")
        if self.max_copies_per_second is not None and self.max_copies_per_second <= 0:
            raise DrOptionsError(f"--max-copies-per-second must be > 0, got {self.max_copies_per_second}")
        if self.mode is DrMode.FOLLOW and self.snapshots:
            raise DrOptionsError("--mode follow copies each job's newest completed checkpoint; it takes no --snapshot "
                                 "(copy a chosen snapshot with --mode copy --snapshot URI)")
        if self.mode is DrMode.FOLLOW and self.include_external:
            raise DrOptionsError("--mode follow copies only files below the indexed roots; a checkpoint that "
                                 "references others is refused by name (copy it with --mode copy "
                                 "--include-external)")
        if self.max_fallbacks < 0:
            raise DrOptionsError(f"--max-fallbacks must be >= 0, got {self.max_fallbacks}")
        for target in [d for _, d in self.targets.pairs] + ([self.targets.base] if self.targets.base else []):
            self._check_allowed(target)
        for src, dst in self.targets.pairs:
            self._check_apart(src, dst, [src])

    def _check_allowed(self, target: str) -> None:
        allowed = [a.rstrip("/") for a in self.allowed_targets]
        if not any(_under(target, a) for a in allowed):
            raise DrOptionsError(f"target {target} is not below any allowed target prefix {allowed}: add it to the "
                                 "Variable statekeeper_dr_allowed_targets (--allowed-targets) if it is meant as a DR "
                                 "location")
        # Where the writes land: a symlink on the way may lead out of every allowed prefix.
        real = resolved_uri(target)
        if not any(_under(real, resolved_uri(a)) for a in allowed):
            raise DrOptionsError(f"target {target} resolves to {real} (a symlink on the way), which is not below any "
                                 f"allowed target prefix {allowed}: give the real location as the target, or allow it "
                                 "in statekeeper_dr_allowed_targets (--allowed-targets)")

    @staticmethod
    def _check_apart(src: str, dst: str, source_roots: list[str]) -> None:
        """`dst` neither in, around nor on any source root, as spelled and after resolving local symlinks
        (nothing is created before this holds: the copy makes local target roots first)."""
        real = resolved_uri(dst)
        for root in source_roots:
            real_root = resolved_uri(root)
            if _overlap(dst, root) or _overlap(real, real_root):
                seen = "" if real == dst and real_root == root.rstrip("/") else f" (resolved: {real} and {real_root})"
                raise DrOptionsError(f"target {dst} (for {src}) overlaps the source root {root}{seen}: a DR copy must "
                                     "never write into, around or onto its source; choose a target outside every "
                                     "source root, not reached through a symlink into one")

    def mapping(self, source_roots: list[str]) -> dict[str, str]:
        """Source root -> target root, checked against the allowlist and the source roots."""
        out = self.targets.resolve(source_roots)
        seen: dict[str, str] = {}
        for src, dst in out.items():
            self._check_allowed(dst)
            self._check_apart(src, dst, source_roots)
            for other_dst, other_src in seen.items():
                if _overlap(dst, other_dst):
                    raise DrOptionsError(f"source roots {other_src} and {src} map to overlapping targets "
                                         f"{other_dst} and {dst}: give each root a target of its own")
            seen[dst] = src
        return out

    def to_json(self) -> str:
        return json.dumps({
            "targets": [f"{s}={d}" for s, d in self.targets.pairs] + ([self.targets.base] if self.targets.base else []),
            "allowed_targets": list(self.allowed_targets), "mode": self.mode.value,
            "savepoints": self.savepoints.value, "snapshots": list(self.snapshots), "job_filter": self.job_filter,
            "include_external": self.include_external, "verify": self.verify.value,
            "copies_in_flight": self.copies_in_flight, "max_fallbacks": self.max_fallbacks,
            "max_copies_per_second": self.max_copies_per_second,
        }, sort_keys=True)


def parse_allowed(values: list[str]) -> tuple[str, ...]:
    return tuple(_canonical(v, "allowed target") for group in values for v in group.split(",") if v.strip())
