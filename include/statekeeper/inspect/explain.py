"""`statekeeper explain <uri>`: who references this, and what does this need?

Reads the warehouse's Delta tables with deltalake (partition-pruned, filtered reads; no Spark):

* a **snapshot** (its directory or `_metadata`): every file it needs and where each lives (its own
  directory, its own job's shared/, other jobs, savepoints, outside the roots), whether the listing
  has it, the latest validation findings, its dependencies (direct and transitive), and which
  other retained snapshots use files of its directory;
* a **job directory, savepoint, any directory or file** below an indexed root: the retained
  snapshots that reference files under it (exact, from `references`), hence whether deleting it
  would break a retained snapshot, plus the snapshots whose lineage passes through it.

The answer is only as complete as the index: snapshots that could not be parsed may reference
anything, and chains computed from older index versions may miss new snapshots. Both show up as
caveats in the report (and in `--json`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.compute as pc

from statekeeper.units import human_size
from statekeeper.layout.locate import EXTERNAL_ROOT_ID, METADATA_SUFFIX, location_job_dir
from statekeeper.storage.roots import root_id_of
from statekeeper.tables import cut
from statekeeper.tables.reader import TableReader
from statekeeper.tables.vocabulary import (
    FOREIGN_RELATIONS,
    ChainsRunStatus,
    Check,
    Dependency,
    FileKind,
    Relation,
    SnapshotStatus,
)
from statekeeper.tables.warehouse import Warehouse
from statekeeper.uri import is_under, normalize_uri

JSON_SCHEMA_VERSION = 1
SNAPSHOT = "snapshot"
DIRECTORY = "directory"   # a job directory, savepoint directory, shared/, any directory or a file


@dataclass(frozen=True)
class Referencer:
    snapshot_uri: str
    snapshot_type: str | None
    job_id: str | None
    checkpoint_id: int | None
    relation: str                  # of the referenced location to the referencing snapshot
    files: int
    bytes: int


@dataclass(frozen=True)
class LineageEdge:
    snapshot_uri: str
    target_uri: str
    target_kind: str
    relation: str
    dependency: str
    depth: int
    via: tuple[str, ...]
    files: int | None
    bytes: int | None


@dataclass(frozen=True)
class FileNeed:
    file_uri: str
    target_uri: str
    target_kind: str
    relation: str
    stated_bytes: int | None
    listed_bytes: int | None
    in_listing: bool | None       # None: outside every indexed root, the listing cannot tell


@dataclass
class ExplainReport:
    uri: str
    kind: str
    root: str | None
    snapshot: dict[str, Any] | None = None
    needs: list[FileNeed] = field(default_factory=list)
    depends_on: list[LineageEdge] = field(default_factory=list)
    referenced_by: list[Referencer] = field(default_factory=list)
    lineage_through: list[LineageEdge] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    index_run: dict[str, Any] | None = None
    chains_run: dict[str, Any] | None = None

    @property
    def would_break(self) -> list[str]:
        """Retained snapshots (other than the explained snapshot itself) that use files under the URI."""
        own = self.snapshot["uri"] if self.snapshot else None
        return sorted({r.snapshot_uri for r in self.referenced_by if r.snapshot_uri != own})

    def to_mapping(self) -> dict[str, Any]:
        out = {"schema_version": JSON_SCHEMA_VERSION, **asdict(self), "would_break": self.would_break}
        return json.loads(json.dumps(out, default=str))


def explain(uri: str, warehouse: Warehouse) -> ExplainReport:
    from statekeeper.tables import cut

    index_cut, versions = cut.pin_cut(warehouse, ("files", "snapshots", "references"))
    if index_cut.version("inline_state") is not None:
        versions["inline_state"] = index_cut.version("inline_state")
    reader = TableReader(warehouse, versions)
    reader.require("snapshots", "index_checkpoints")
    reader.require("pins", "compute_chains")
    target = normalize_uri(uri)
    roots = _indexed_roots(reader)
    root = next((r for r in roots if is_under(target, r)), None)
    report = ExplainReport(target, DIRECTORY, root)
    report.index_run = _latest(reader, "index_runs")
    report.chains_run = _latest(reader, "chains_runs")
    _caveats(reader, report)

    snapshot = _find_snapshot(reader, target, root) if root is not None else None
    if snapshot is not None:
        report.kind = SNAPSHOT
        report.snapshot = snapshot
        _explain_snapshot(reader, report)
        own_dir = snapshot["uri"][: -len(METADATA_SUFFIX)]
        _explain_location(reader, report, own_dir, root)
    else:
        _explain_location(reader, report, target, root)
    return report


# -- pieces ------------------------------------------------------------------------------------

def _indexed_roots(reader: TableReader) -> list[str]:
    runs = reader.read("index_runs", columns=["roots"])
    roots: set[str] = set()
    if runs.num_rows:
        for group in runs.column("roots").to_pylist():
            roots.update(group or ())
    state = reader.state("snapshots")
    if state is not None:
        # Roots indexed without an audit row (or before index_runs existed): one data file of each
        # root's partitions names it.
        seen = {root_id_of(r) for r in roots}
        for f in state.files:
            rid = f.partition_values.get("root_id")
            if rid not in seen:
                seen.add(rid)
                t = reader.read("snapshots", partitions=[(c, "=", v) for c, v in f.partition_values.items()],
                                columns=["root"])
                roots.update(t.column("root").to_pylist()[:1])
    return sorted(roots, key=len, reverse=True)


def _latest(reader: TableReader, name: str) -> dict[str, Any] | None:
    keep = ("run_id", "status", "finished_at", "source_versions", "table_versions", "unparsed_snapshots",
            "unparsed_examples")
    row = reader.newest(name)
    return None if row is None else {k: v for k, v in row.items() if k in keep}


def _caveats(reader: TableReader, report: ExplainReport) -> None:
    run = report.chains_run
    current = {n: reader.version(n) for n in ("snapshots", "references", "files")}
    sources = dict((run or {}).get("source_versions") or [])
    fresh = run is not None and all(sources.get(n) == v for n, v in current.items() if v is not None)
    if fresh and run is not None:
        unparsed = int(run.get("unparsed_snapshots") or 0)
        examples = list(run.get("unparsed_examples") or [])
    else:
        # No chains run for this index state: look at every snapshot's status.
        bad = reader.read("snapshots", filters=pc.field("status") != SnapshotStatus.OK, columns=["uri", "status"])
        unparsed, examples = bad.num_rows, sorted(bad.column("uri").to_pylist())
    if unparsed:
        report.caveats.append(
            f"{unparsed} indexed _metadata could not be parsed ({', '.join(examples[:3])}): they may reference "
            "files this report does not show; do not delete anything on the strength of it until they are fixed "
            "or removed")
    if run is None:
        report.caveats.append("no chains run recorded: dependencies/pins may be missing")
        return
    stale = cut.behind(sources, current)
    if stale:
        report.caveats.append(f"chains were computed from older index versions ({', '.join(stale)}); "
                              "run compute_chains again for an up-to-date answer")
    if run.get("status") not in (ChainsRunStatus.SUCCEEDED, ChainsRunStatus.INCOMPLETE):
        report.caveats.append(f"the latest chains run {run['run_id']} is {run['status']}")


def _partition(uri: str, root: str) -> tuple[str, str | None]:
    rel = uri[len(root.rstrip("/")) + 1:] if uri != root else ""
    first = rel.split("/", 1)[0] if rel else None
    return root_id_of(root), (location_job_dir(first) if first else None)


def _find_snapshot(reader: TableReader, target: str, root: str) -> dict[str, Any] | None:
    candidate = target if target.endswith(METADATA_SUFFIX) else target + METADATA_SUFFIX
    rel = candidate[len(root.rstrip("/")) + 1:]
    job_dir = rel.split("/", 1)[0] if "/" in rel else "."
    rows = reader.read("snapshots", partitions=[("root_id", "=", root_id_of(root)), ("job_dir", "=", job_dir)],
                       filters=pc.field("uri") == candidate)
    if not rows.num_rows:
        return None
    row = rows.to_pylist()[0]
    keep = ("uri", "root", "job_dir", "job_id", "status", "error", "snapshot_type", "snapshot_format", "sharing",
            "checkpoint_id", "dir_checkpoint_id", "metadata_version", "referenced_file_count", "referenced_bytes",
            "inline_bytes")
    return {k: row.get(k) for k in keep}


def _edge(row: dict[str, Any]) -> LineageEdge:
    return LineageEdge(row["snapshot_uri"], row["target_uri"], row["target_kind"], row["relation"],
                       row["dependency"], row["depth"], tuple(row["via"] or ()), row["files"], row["bytes"])


def _explain_snapshot(reader: TableReader, report: ExplainReport) -> None:
    snap = report.snapshot
    assert snap is not None
    part = [("root_id", "=", root_id_of(snap["root"])), ("job_dir", "=", snap["job_dir"])]
    deps = reader.read("dependencies", partitions=part, filters=pc.field("snapshot_uri") == snap["uri"]).to_pylist()
    report.depends_on = sorted((_edge(r) for r in deps),
                               key=lambda e: (e.dependency != Dependency.DIRECT, e.depth, e.target_uri))
    direct = [e for e in report.depends_on if e.dependency == Dependency.DIRECT]
    refs = reader.read("references", partitions=part, filters=pc.field("snapshot_uri") == snap["uri"],
                       columns=["snapshot_uri", "file_uri", "file_root", "file_job_dir", "file_kind", "stated_size",
                                "segment_start", "segment_length"])
    extents: dict[str, tuple[int | None, str | None, str | None, str]] = {}
    for r in refs.to_pylist():
        end = (r["segment_start"] + r["segment_length"]) if r["segment_start"] is not None else r["stated_size"]
        prev = extents.get(r["file_uri"])
        if prev is None or (end is not None and (prev[0] is None or end > prev[0])):
            extents[r["file_uri"]] = (end, r["file_root"], r["file_job_dir"], r["file_kind"])
    listed = _listed_sizes(reader, extents)
    targets = sorted(direct, key=lambda e: -len(e.target_uri))
    needs = []
    for file_uri, (end, froot, _fjob, fkind) in sorted(extents.items()):
        if fkind == FileKind.FILE_MERGING_MANAGED_DIR:
            continue
        edge = next((e for e in targets if file_uri.startswith(e.target_uri.rstrip("/") + "/")), None)
        needs.append(FileNeed(file_uri, edge.target_uri if edge else "?", edge.target_kind if edge else "?",
                              edge.relation if edge else "?", end, listed.get(file_uri),
                              None if froot is None else file_uri in listed))
    report.needs = needs
    findings = reader.read("validation_results", partitions=part, filters=pc.field("snapshot_uri") == snap["uri"])
    report.findings = sorted(
        ({k: r[k] for k in ("run_id", "check", "severity", "subject", "detail", "restorable", "validated_at")}
         for r in findings.to_pylist()), key=lambda f: (f["check"] != Check.SNAPSHOT, f["check"], f["subject"] or ""))


def _listed_sizes(reader: TableReader, extents: dict[str, tuple]) -> dict[str, int]:
    by_partition: dict[tuple[str, str], list[str]] = {}
    for uri, (_end, froot, fjob, _kind) in extents.items():
        if froot is not None and fjob is not None:
            by_partition.setdefault((root_id_of(froot), fjob), []).append(uri)
    out: dict[str, int] = {}
    for (rid, job_dir), uris in by_partition.items():
        t = reader.read("files", partitions=[("root_id", "=", rid), ("job_dir", "=", job_dir)],
                        filters=pc.field("uri").isin(uris), columns=["uri", "size"])
        out.update(zip(t.column("uri").to_pylist(), t.column("size").to_pylist(), strict=True))
    return out


def _explain_location(reader: TableReader, report: ExplainReport, target: str, root: str | None) -> None:
    """Who references files at or below `target` (exactly), and whose lineage passes through it."""
    if root is None:
        parts = [("root_id", "=", EXTERNAL_ROOT_ID)]
    else:
        rid, job_dir = _partition(target, root)
        parts = [("root_id", "=", rid)] + ([("job_dir", "=", job_dir)] if job_dir else [])
    pins = reader.read("pins", partitions=parts).to_pylist()
    prefix = target.rstrip("/") + "/"

    def related(t: str) -> bool:
        return t == target or t.startswith(prefix) or target.startswith(t.rstrip("/") + "/")

    rows = [r for r in pins if related(r["target_uri"])]
    direct = [r for r in rows if r["dependency"] == Dependency.DIRECT]
    report.lineage_through = sorted((_edge(r) for r in rows if r["dependency"] == Dependency.TRANSITIVE),
                                    key=lambda e: (e.depth, e.snapshot_uri))
    # Pins say which snapshots use files of the target's directory; count exactly what each uses
    # at or below the URI from its references.
    candidates: dict[str, dict[str, Any]] = {}
    for r in direct:
        candidates.setdefault(r["snapshot_uri"], r)
    by_partition: dict[tuple[str, str], list[str]] = {}
    for s, r in candidates.items():
        by_partition.setdefault((r["snapshot_root_id"], r["snapshot_job_dir"]), []).append(s)
    usage = _usage_below(reader, target, prefix, by_partition)
    # The relation reported is the one of the pinned directory to the snapshot; the explained
    # snapshot's own directory is reported as such.
    referencers = []
    for s, (n, b) in usage.items():
        r = candidates[s]
        relation = _strongest(r["relation"] for r in direct if r["snapshot_uri"] == s)
        referencers.append(Referencer(s, r["snapshot_type"], r["snapshot_job_id"], r["snapshot_checkpoint_id"],
                                      relation, n, b))
    report.referenced_by = sorted(referencers, key=lambda x: (_RELATION_ORDER.get(x.relation, 9), x.snapshot_uri))


def _usage_below(reader: TableReader, target: str, prefix: str,
                 by_partition: dict[tuple[str, str], list[str]]) -> dict[str, list[int]]:
    """Per snapshot (of those by index partition): the distinct files it references at or below
    `target`, and their bytes on storage (a segment counts to its end; a managed directory, none)."""
    usage: dict[str, list[int]] = {}
    for (rid, job_dir), snaps in by_partition.items():
        f = pc.field("snapshot_uri").isin(snaps) & ((pc.field("file_uri") == target)
                                                   | pc.starts_with(pc.field("file_uri"), prefix))
        t = reader.read("references", partitions=[("root_id", "=", rid), ("job_dir", "=", job_dir)], filters=f,
                        columns=["snapshot_uri", "file_uri", "file_kind", "stated_size", "segment_start",
                                 "segment_length"])
        seen: dict[tuple[str, str], int] = {}
        for x in t.to_pylist():
            end = (x["segment_start"] + x["segment_length"]) if x["segment_start"] is not None else x["stated_size"]
            key = (x["snapshot_uri"], x["file_uri"])
            if x["file_kind"] == FileKind.FILE_MERGING_MANAGED_DIR:
                end = 0
            seen[key] = max(seen.get(key, 0), end or 0)
        for (s, _f), end in seen.items():
            u = usage.setdefault(s, [0, 0])
            u[0] += 1
            u[1] += end
    return usage


_RELATION_ORDER = {Relation.SELF: 0, Relation.OWN_JOB: 1, Relation.OTHER_JOB: 2, Relation.SAVEPOINT: 3,
                   Relation.EXTERNAL: 4}


def _strongest(relations: Any) -> str:
    return min(relations, key=lambda r: _RELATION_ORDER.get(r, 9))


# -- rendering ---------------------------------------------------------------------------------

def render_text(report: ExplainReport) -> str:
    out: list[str] = []
    w = out.append
    if report.kind == SNAPSHOT and report.snapshot:
        out.extend(_snapshot_lines(report))
    else:
        w(f"{report.uri}" + ("" if report.root else "  (outside every indexed root)"))
    w("")
    subject = "this snapshot's directory" if report.kind == SNAPSHOT else "it"
    others = [r for r in report.referenced_by if not (report.snapshot and r.snapshot_uri == report.snapshot["uri"])]
    if others:
        w(f"Referenced directly by {len(others)} retained snapshot(s) (deleting {subject} breaks them):")
        for r in others:
            w(f"  {_RELATION_TEXT.get(r.relation, r.relation):<22} {r.files:>6} file(s) {human_size(r.bytes):>10}  "
              f"{r.snapshot_uri}")
    else:
        w(f"No other retained snapshot references files under {subject}.")
    if report.lineage_through:
        w(f"\nLineage of {len(report.lineage_through)} snapshot(s) passes through it (they do not use its files "
          "themselves):")
        for e in report.lineage_through:
            w(f"  depth {e.depth}: {e.snapshot_uri} via {' -> '.join(e.via)}")
    for c in report.caveats:
        w(f"\nCAVEAT: {c}")
    if report.chains_run:
        w(f"\n(chains run {report.chains_run['run_id']} at {report.chains_run['finished_at']}; "
          f"index run {report.index_run['run_id'] if report.index_run else '-'})")
    return "\n".join(out) + "\n"


def _snapshot_lines(report: ExplainReport) -> list[str]:
    """An explained snapshot: what it is, the files it needs by where they live (missing ones named),
    its lineage and its latest validation findings."""
    out: list[str] = []
    w = out.append
    s = report.snapshot
    w(f"{s['snapshot_type'] or 'snapshot'} {s['uri']}")
    w(f"  job {s['job_id'] or '-'}, checkpoint id {s['checkpoint_id'] if s['checkpoint_id'] is not None else s['dir_checkpoint_id']}, "
      f"_metadata {s['status']}" + (f": {s['error']}" if s["error"] else ""))
    groups: dict[tuple[str, str, str], list[FileNeed]] = {}
    for n in report.needs:
        groups.setdefault((n.relation, n.target_kind, n.target_uri), []).append(n)
    w(f"\nNeeds {len(report.needs)} file(s), {human_size(sum(n.stated_bytes or 0 for n in report.needs))} stated:")
    for (relation, kind, t), needs in sorted(groups.items(), key=lambda kv: (_RELATION_ORDER.get(kv[0][0], 9), kv[0][2])):
        missing = [n for n in needs if n.in_listing is False]
        unknown = [n for n in needs if n.in_listing is None]
        w(f"  {_RELATION_TEXT.get(relation, relation):<22} {len(needs):>6} file(s) {human_size(sum(n.stated_bytes or 0 for n in needs)):>10}  {t}"
          + (f"  [{len(missing)} MISSING from the listing]" if missing else "")
          + (f"  [{len(unknown)} outside the indexed roots]" if unknown else ""))
        for n in missing[:5]:
            w(f"      missing: {n.file_uri}")
    trans = [e for e in report.depends_on if e.dependency == Dependency.TRANSITIVE]
    if trans:
        w("\nLineage (through the directories above, not files it uses itself):")
        for e in trans:
            w(f"  depth {e.depth}: {e.target_uri} via {' -> '.join(e.via)}")
    if report.findings:
        w(f"\nLatest validation ({report.findings[0]['run_id']}):")
        for f in report.findings:
            w(f"  {f['severity']:<7} {f['check']:<18} {f['detail']}")
    return out


_RELATION_TEXT = {Relation.SELF: "own directory", Relation.OWN_JOB: "own job", Relation.OTHER_JOB: "other job",
                  Relation.SAVEPOINT: "savepoint", Relation.EXTERNAL: "outside the roots"}
assert set(_RELATION_TEXT) >= FOREIGN_RELATIONS
