"""`statekeeper inspect`: what an operator needs at 3 a.m. about one `_metadata`.

Answers "why is my `_metadata` 3 GB and which operator is it?" and "what does this snapshot
reference outside its own directory?". `build_report` returns a plain dict with a stable, documented
schema (JSON_SCHEMA_VERSION); `render_text` turns it into the human report.

JSON schema (schema_version 1). All sizes are bytes; ids are Flink's 32-hex strings.
{
  "schema_version": 1,
  "metadata_uri": str, "snapshot_dir": str,
  "metadata_version": int, "checkpoint_id": int,
  "snapshot_type": "checkpoint"|"savepoint"|null, "snapshot_type_name": str|null,
  "format": "CANONICAL"|"NATIVE"|null, "sharing": "FORWARD_BACKWARD"|"FORWARD"|"NO_SHARING"|null,
  "size": {"total_bytes", "inline_bytes", "structure_bytes", "task_inline_bytes",
           "coordinator_bytes", "master_bytes", "changelog_inline_bytes", "channel_blob_bytes"},
  "references": {"files", "bytes", "managed_dirs", "outside_files", "outside_bytes"},
  "master_states": [{"name", "version", "bytes"}],
  "operators": [{                                  # largest inline_bytes first
      "operator_id", "name", "uid", "parallelism", "max_parallelism",
      "subtask_states", "finished_subtasks", "fully_finished",
      "inline_bytes", "coordinator_bytes", "inline_handles",
      "inline_by_kind": [{"slot", "role", "handle_kind", "bytes", "handles"}],   # largest first
      "referenced_files", "referenced_bytes",
      "top_inline": [{"subtask", "slot", "role", "handle_kind", "bytes", "handles"}]  # --top N
  }],
  "outside_references": [{"directory", "files", "bytes", "managed_dirs", "same_job"}]
                        # grouped by parent directory; managed_dirs>0: a tag-17 directory itself;
                        # same_job: under this checkpoint's own job directory (its shared/ etc.);
                        # other jobs' directories first
}
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from statekeeper.format import CheckpointMetadata, account, extract_references
from statekeeper.format.references import MANAGED_DIR, MetadataReferences
from statekeeper.units import human_size

JSON_SCHEMA_VERSION = 1
_RELEASES = {2: "Flink 1.3-1.10", 3: "Flink 1.11-1.15", 4: "Flink 1.16-1.20", 5: "Flink 2.0", 6: "Flink 2.1+"}


def _physical(files) -> tuple[int, int]:
    sizes: dict[str, int] = {}
    for f in files:
        if f.scope == MANAGED_DIR:
            continue
        size = f.stated_size if f.segment_start is None else f.segment_start + f.segment_length
        if size > sizes.get(f.uri, -1):
            sizes[f.uri] = size
    return len(sizes), sum(sizes.values())


def build_report(model: CheckpointMetadata, metadata_uri: str, *, top: int = 5,
                 refs: MetadataReferences | None = None) -> dict[str, Any]:
    refs = refs if refs is not None else extract_references(model, metadata_uri)
    acc = account(model)
    props = model.properties
    n_files, n_bytes = _physical(refs.files)
    outside = refs.outside_snapshot()
    out_files, out_bytes = _physical(outside)
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "metadata_uri": refs.metadata_uri,
        "snapshot_dir": refs.snapshot_dir,
        "metadata_version": model.version,
        "checkpoint_id": model.checkpoint_id,
        "snapshot_type": props.snapshot_type if props else None,
        "snapshot_type_name": props.type_name if props else None,
        "format": props.format if props else None,
        "sharing": props.sharing if props else None,
        "size": {
            "total_bytes": acc.total_size,
            "inline_bytes": acc.inline_bytes,
            "structure_bytes": acc.structure_bytes,
            "task_inline_bytes": acc.handle_inline_bytes,
            "coordinator_bytes": acc.coordinator_bytes,
            "master_bytes": acc.master_bytes,
            "changelog_inline_bytes": acc.changelog_bytes,
            "channel_blob_bytes": acc.channel_blob_bytes,
        },
        "references": {
            "files": n_files, "bytes": n_bytes, "managed_dirs": len(refs.managed_dirs()),
            "outside_files": out_files, "outside_bytes": out_bytes,
        },
        "master_states": [
            {"name": m.name, "version": m.version, "bytes": m.payload.length} for m in model.master_states
        ],
        "operators": _operators(model, refs, top),
        "outside_references": _outside_groups(refs.snapshot_dir, outside),
    }


def _operators(model: CheckpointMetadata, refs: MetadataReferences, top: int) -> list[dict[str, Any]]:
    """Per operator: identity, inline bytes by kind and its largest contributors, referenced files;
    the largest inline state first."""
    per_op_files: dict[str, list] = defaultdict(list)
    for f in refs.files:
        if f.operator_id is not None:
            per_op_files[f.operator_id].append(f)
    per_op_inline: dict[str, list] = defaultdict(list)
    for s in refs.inline:
        if s.operator_id is not None:
            per_op_inline[s.operator_id].append(s)
    operators = []
    for op in model.operators:
        inl = per_op_inline.get(op.operator_id, [])
        contributors = sorted(inl, key=lambda s: (-s.inline_bytes, s.subtask if s.subtask is not None else -1))
        f_count, f_bytes = _physical(per_op_files.get(op.operator_id, []))
        operators.append({
            "operator_id": op.operator_id,
            "name": op.name,
            "uid": op.uid,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "subtask_states": len(op.subtasks),
            "finished_subtasks": sum(1 for s in op.subtasks if s.finished),
            "fully_finished": op.fully_finished,
            "inline_bytes": sum(s.inline_bytes for s in inl),
            "coordinator_bytes": op.coordinator.payload.length if op.coordinator else 0,
            "inline_handles": sum(s.handle_count for s in inl),
            "inline_by_kind": _inline_by_kind(inl),
            "referenced_files": f_count,
            "referenced_bytes": f_bytes,
            "top_inline": [
                {"subtask": s.subtask, "slot": s.slot, "role": s.role, "handle_kind": s.handle_kind,
                 "bytes": s.inline_bytes, "handles": s.handle_count}
                for s in contributors[: max(top, 0)]
            ],
        })
    operators.sort(key=lambda o: (-o["inline_bytes"], -o["referenced_bytes"], o["operator_id"]))
    return operators


def _inline_by_kind(inline: list) -> list[dict[str, Any]]:
    by_kind: dict[tuple, list] = defaultdict(lambda: [0, 0])
    for s in inline:
        a = by_kind[(s.slot, s.role, s.handle_kind)]
        a[0] += s.inline_bytes
        a[1] += s.handle_count
    return sorted(
        ({"slot": k[0], "role": k[1], "handle_kind": k[2], "bytes": v[0], "handles": v[1]}
         for k, v in by_kind.items()),
        key=lambda d: (-d["bytes"], d["slot"], d["role"]),
    )


def _outside_groups(snapshot_dir: str, outside: list) -> list[dict[str, Any]]:
    """References outside the snapshot directory, by directory; this job's own first, then by bytes."""
    # A checkpoint's own job directory (parent of chk-N) holds its shared/ and taskowned/: those
    # references are normal; anything else belongs to another job, a savepoint or DSTL.
    snap_name = snapshot_dir.rsplit("/", 1)[-1]
    job_dir = snapshot_dir.rsplit("/", 1)[0] if snap_name.startswith("chk-") else None
    groups: dict[str, list] = defaultdict(list)
    for f in outside:
        directory = f.uri if f.scope == MANAGED_DIR else f.uri.rsplit("/", 1)[0]
        groups[directory].append(f)
    outside_groups = []
    for directory, fs in groups.items():
        c, b = _physical(fs)
        dirs = sum(1 for f in fs if f.scope == MANAGED_DIR)
        same_job = job_dir is not None and directory.startswith(job_dir + "/")
        outside_groups.append({"directory": directory, "files": c, "bytes": b, "managed_dirs": dirs,
                               "same_job": same_job})
    outside_groups.sort(key=lambda g: (g["same_job"], -g["bytes"], g["directory"]))
    return outside_groups


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False)


def _pct(part: int, whole: int | None) -> str:
    if not whole:
        return ""
    return f" ({100 * part / whole:.1f}%)"


def render_text(r: dict[str, Any]) -> str:
    lines = _header_lines(r)
    lines.append("")
    lines.append(f"operators ({len(r['operators'])}, largest inline state first)")
    for op in r["operators"]:
        lines.extend(_operator_lines(op, r["size"]["total_bytes"]))
    lines.append("")
    if r["outside_references"]:
        lines.append(f"referenced outside {r['snapshot_dir']} (OTHER: another job, a savepoint, DSTL)")
        for g in r["outside_references"]:
            what = f"{g['files']} files  {human_size(g['bytes'])}" if g["files"] else ""
            if g["managed_dirs"]:
                what = (what + "  " if what else "") + "file-merging managed directory"
            owner = "this job" if g["same_job"] else "OTHER"
            lines.append(f"  {owner:8}  {g['directory']}  {what}")
    else:
        lines.append("no references outside the snapshot directory")
    return "\n".join(lines) + "\n"


def _header_lines(r: dict[str, Any]) -> list[str]:
    """The file: what it is, how its bytes split, what it references, its master state."""
    s = r["size"]
    total = s["total_bytes"]
    lines = [f"_metadata   {r['metadata_uri']}"]
    kind = r["snapshot_type"] or "unknown type (no or null CheckpointProperties)"
    detail = ", ".join(x for x in (r["snapshot_type_name"] and f'"{r["snapshot_type_name"]}"', r["format"], r["sharing"]) if x)
    lines.append(
        f"snapshot    {kind}{' ' + detail if detail else ''}, checkpoint id {r['checkpoint_id']}, "
        f"metadata V{r['metadata_version']} ({_RELEASES.get(r['metadata_version'], '?')})"
    )
    lines.append(
        f"size        {human_size(total)} total = {human_size(s['inline_bytes'])} inline state"
        f"{_pct(s['inline_bytes'], total)} + {human_size(s['structure_bytes'])} handles/paths/offsets"
    )
    lines.append(
        f"            inline: {human_size(s['task_inline_bytes'])} task state, "
        f"{human_size(s['coordinator_bytes'])} coordinator, {human_size(s['master_bytes'])} master, "
        f"{human_size(s['changelog_inline_bytes'])} in-memory changelog"
        + (f"; {human_size(s['channel_blob_bytes'])} merged-channel offsets" if s["channel_blob_bytes"] else "")
    )
    ref = r["references"]
    lines.append(
        f"references  {ref['files']} files, {human_size(ref['bytes'])} stated"
        f"; {ref['outside_files']} files ({human_size(ref['outside_bytes'])}) outside {r['snapshot_dir']}"
        + (f"; {ref['managed_dirs']} file-merging managed dirs" if ref["managed_dirs"] else "")
    )
    if r["master_states"]:
        ms = ", ".join(f"{m['name'] or '<unnamed>'} {human_size(m['bytes'])}" for m in r["master_states"])
        lines.append(f"master      {ms}")
    return lines


def _operator_lines(op: dict[str, Any], total: int | None) -> list[str]:
    label = op["name"] or "<no name>"
    uid = f" uid={op['uid']}" if op["uid"] else ""
    finished = " FULLY FINISHED" if op["fully_finished"] else (
        f", {op['finished_subtasks']} finished" if op["finished_subtasks"] else "")
    lines = [
        f"  {label}{uid}  id={op['operator_id']}  parallelism {op['parallelism']}/{op['max_parallelism']}"
        f"  subtask states {op['subtask_states']}{finished}",
        f"      inline {human_size(op['inline_bytes'])}{_pct(op['inline_bytes'], total)} in "
        f"{op['inline_handles']} payloads (coordinator {human_size(op['coordinator_bytes'])}); "
        f"references {op['referenced_files']} files, {human_size(op['referenced_bytes'])}",
    ]
    for k in op["inline_by_kind"][:6]:
        lines.append(
            f"        {human_size(k['bytes']):>10}  {k['slot']}/{k['role']}  {k['handle_kind']} x{k['handles']}"
        )
    if op["top_inline"] and op["inline_bytes"]:
        tops = "; ".join(
            f"{'op-level' if t['subtask'] is None else 'subtask ' + str(t['subtask'])} {t['slot']}/{t['role']} "
            f"{human_size(t['bytes'])}"
            for t in op["top_inline"]
        )
        lines.append(f"      largest: {tops}")
    return lines
