"""`make demo`: the maintenance pipeline end to end on the embedded default.

Local storage, local Spark (`local[2]`), Airflow with SQLite: reuse (or write, with real Flink) a
sample checkpoint store that holds a cross-job restore chain, savepoints, a failed checkpoint and
orphan files; run the `checkpoint_maintenance` DAG on it with `dag.test()` (index, reference
chains, validation, and a GC plan: a dry run, the cached store is read-only); print what it found and
where the tables are. Then garbage-collect for real on a copy of the store: a second DAG run with
`gc_mode=delete` on a relocated copy whose files are dated two days back (so a one-day grace period
applies), listing what was deleted. Last, the `checkpoint_dr_copy` DAG copies every job's latest
restorable checkpoint and the newest savepoints of the sample store to a second local root
(`.statekeeper/dr-store`), `_metadata` rewritten, verified there. Then a DAG run with `compact` and
`maintain_warehouse` switched on, over a copy of an inline-heavy store (1 MiB inline threshold):
compaction writes new `compacted/chk-N/` snapshots beside their sources, and the warehouse's tables are
optimized and vacuumed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from statekeeper.dev.airflow_local import PROJECT_ROOT, local_airflow_env, prepare
from statekeeper.dev.dag_console import console_to_file, run_dag_quietly

DEMO_FLINK_VERSION = "2.3.0"
# Scenarios whose stores together show every kind of object the pipeline handles.
DEMO_SCENARIOS = ("chain_claim", "savepoints", "failed_and_orphans")


def sample_store_roots(version: str = DEMO_FLINK_VERSION, say: Callable[[str], None] = print) -> list[str]:
    """Roots of the sample stores, written by real Flink on first use and cached afterwards.

    The generator is the test harness's (tests/harness); the demo reuses it rather than shipping a
    second way to make checkpoints.
    """
    sys.path.insert(0, str(PROJECT_ROOT))
    from tests.harness import get_fixture

    roots: list[str] = []
    for scenario in DEMO_SCENARIOS:
        started = time.monotonic()
        fixture = get_fixture(version, scenario)
        say(f"  sample store {scenario:<20} {fixture.root}  ({time.monotonic() - started:.0f}s)")
        for sub in ("checkpoints", "savepoints"):
            if (fixture.root / sub).is_dir():
                roots.append((fixture.root / sub).as_uri())
    return roots


def run_dag(roots: list[str], warehouse: str, airflow_home: Path, *, log: Path, say: Callable[[str], None],
            dag_id: str = "checkpoint_maintenance", **conf: object) -> str:
    """One DAG run with dag.test(), inside `console_to_file(log)`: a line per task on the terminal."""
    env = local_airflow_env(airflow_home)
    os.environ.update(env)  # Airflow reads its configuration on first import
    prepare(airflow_home, env)   # skipped when the home's stamp says it is prepared with these settings
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(PROJECT_ROOT / "dags"))
    if bag.import_errors:
        raise SystemExit(f"DAG import errors: {bag.import_errors}")
    outcome = run_dag_quietly(bag.dags[dag_id], {**({"roots": roots} if roots else {}), "warehouse": warehouse,
                                                 **conf}, log, say)
    if not outcome.succeeded:
        failed = [t.task_id for t in outcome.tasks if t.state == "failed"]
        raise SystemExit(f"DAG run {outcome.run_id} of {dag_id} ended {outcome.state} (failed: {', '.join(failed)}); "
                         f"its whole output is in {log}, each task's log also under {airflow_home / 'logs'}")
    return outcome.run_id


def summarize(warehouse: str, run_id: str) -> str:
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    def table(name: str):
        return DeltaTable(f"{warehouse.rstrip('/')}/{name}").to_pyarrow_table()

    def this_run(name: str):
        return table(name).filter(pc.equal(pc.field("airflow_run_id"), run_id)).to_pylist()

    index_run = (this_run("index_runs") or [{}])[0]
    validation = (this_run("validation_runs") or [{}])[0]
    snapshots, refs, files = table("snapshots"), table("references"), table("files")
    by_status = {s: int(pc.sum(pc.equal(snapshots["status"], s)).as_py() or 0) for s in set(snapshots["status"].to_pylist())}
    kinds: dict[str, int] = {}
    for k in files["kind"].to_pylist():
        kinds[k] = kinds.get(k, 0) + 1
    lines = [
        f"index run {index_run.get('run_id', '?')}: {index_run.get('status', '?')}",
        f"  objects indexed: {files.num_rows}  by kind: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())),
        f"  snapshots: {snapshots.num_rows}  by status: " + ", ".join(f"{k}={v}" for k, v in sorted(by_status.items())),
        f"  references: {refs.num_rows}",
        "reference chains (dependencies): snapshots that use another job's or a savepoint's files",
    ]
    cross = _cross_job_uses(table("dependencies").to_pylist())
    lines += [f"  job {_short(job)} -> {relation} {target}: {n} snapshot(s), {f} files, {b:,} bytes"
              for (job, relation, target), (n, f, b) in sorted(cross.items())] or ["  none"]
    lines.append(f"validation run {validation.get('run_id', '?')}: {validation.get('status', '?')} "
                 f"({validation.get('snapshots', '?')} snapshots, {validation.get('snapshots_with_errors', '?')} "
                 f"with errors, {validation.get('snapshots_with_warnings', '?')} with warnings)")
    lines += _job_health_lines(table("validation_jobs").to_pylist())
    if validation.get("report_uri"):
        lines.append(f"  Data Docs: {validation['report_uri']}")
    lines.append(f"tables: {warehouse}/{{files,snapshots,references,inline_state,index_runs,dependencies,pins,"
                 "validation_results,validation_jobs,...} (Delta; read them with deltalake, polars or Spark)")
    if cross:
        target = sorted(cross)[0][2]
        lines.append(f"who keeps that directory alive: .venv/bin/statekeeper explain {target}/shared --warehouse {warehouse}")
    return "\n".join(lines)


def _short(job_id: str | None) -> str:
    return f"{job_id[:8]}…" if job_id else "?"


def _cross_job_uses(dependencies: list[dict]) -> dict[tuple[str, str, str], list[int]]:
    """(job id, relation, directory) -> [snapshots, files, bytes] of every direct use of another job's
    or a savepoint's files."""
    from statekeeper.tables.vocabulary import FOREIGN_RELATIONS, Dependency

    cross: dict[tuple[str, str, str], list[int]] = {}
    for d in dependencies:
        if d["dependency"] == Dependency.DIRECT and d["relation"] in FOREIGN_RELATIONS:
            acc = cross.setdefault((d["snapshot_job_id"], d["relation"], d["target_uri"]), [0, 0, 0])
            acc[0] += 1
            acc[1] += d["files"] or 0
            acc[2] += d["bytes"] or 0
    return cross


def _job_health_lines(validation_jobs: list[dict]) -> list[str]:
    from statekeeper.tables.vocabulary import UnitKind

    lines = []
    for job in sorted(validation_jobs, key=lambda j: j["location"]):
        if job["kind"] != UnitKind.JOB:
            continue
        latest = job["latest_restorable_checkpoint_id"]
        lines.append(f"  job {_short(job['job_id'])}: newest chk-{job['newest_checkpoint_id']} "
                     f"{'restorable' if job['newest_restorable'] else 'NOT restorable'}; "
                     f"latest restorable: {f'chk-{latest}' if latest is not None else 'none'}")
    return lines


def gc_summary(warehouse: str, run_id: str, label: str) -> str:
    """The DAG run's GC result: planned or deleted files per job directory and reason."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from statekeeper.layout.locate import job_location

    gc_runs = DeltaTable(f"{warehouse.rstrip('/')}/gc_runs").to_pyarrow_table()
    rows = sorted(gc_runs.filter(pc.equal(pc.field("airflow_run_id"), run_id)).to_pylist(),
                  key=lambda r: r["finished_at"])
    if not rows:
        return f"{label}: no gc run recorded"
    run = rows[-1]
    head = (f"{label}: gc run {run['run_id']} ({run['mode']}) {run['status']}: {run['planned']} file(s), "
            f"{run['planned_bytes']:,} bytes planned")
    if run["mode"] == "plan":
        head += ("; nothing deleted (a dry run; files younger than the grace period, 3 days by default, are never "
                 "planned)")
    else:
        head += f"; deleted {run['deleted']}, kept after re-check {run['changed_skipped']}, failed {run['failed']}"
    lines = [head]
    lines += [f"  {job_location(b['root'], b['job_dir'])} {b['reason']}: {b['files']} file(s), {b['bytes']:,} bytes"
              for b in run["breakdown"]]
    lines += [f"  blocked: {b}" for b in run["blocked"]]
    return "\n".join(lines)


def dr_summary(warehouse: str, airflow_run_id: str) -> str:
    from statekeeper.tables import Warehouse
    from statekeeper.tables.reader import TableReader

    reader = TableReader(Warehouse(warehouse))
    run = next(r for r in reader.read("dr_runs").to_pylist() if r["airflow_run_id"] == airflow_run_id)
    copies = [r for r in reader.read("dr_copies").to_pylist() if r["run_id"] == run["run_id"]]
    lines = [f"DR copy {run['run_id']}: {run['status']}, {run['verified']} snapshot(s) verified, {run['failed']} "
             f"failed; {run['files_copied']} object(s) copied ({run['bytes_copied']:,} bytes), "
             f"{run['files_skipped']} already there"]
    lines += [f"  {c['status']:<8} {c['selected_by']:<17} {c['target_metadata_uri'] or c['source_metadata_uri']}"
              for c in sorted(copies, key=lambda c: c["source_metadata_uri"])]
    lines += [f"  problem: {p}" for p in run["problems"]]
    lines.append("  restore one with: flink run -s <its directory> ... (NO_CLAIM), e.g. after moving the sample "
                 "store away")
    return "\n".join(lines)


def report_summary(warehouse: str, airflow_run_id: str) -> str:
    """Where the DR run's report of the warehouse is and how to open it (its `report` task wrote it last)."""
    from statekeeper.report.store import ReportStore
    from statekeeper.tables import Warehouse
    from statekeeper.tables.reader import TableReader

    wh = Warehouse(warehouse)
    mine = {r["run_id"] for r in TableReader(wh).read("report_runs").to_pylist()
            if r["airflow_run_id"] == airflow_run_id}
    store = ReportStore(wh)
    latest = store.latest()
    if latest is None or latest.run_id not in mine:
        return (f"report FAILED (the DR run {airflow_run_id} published none: its report task's log is in the demo's "
                f"log); write one yourself: statekeeper report --warehouse {warehouse}")
    return "\n".join([
        f"report {latest.run_id}: {latest.page_uri}",
        f"  open it in a browser (self-contained, no network needed): {store.latest_page_uri}",
        "  or in the Airflow UI: `make airflow-ui`, log in, Browse > Statekeeper (the Variable statekeeper_warehouse "
        "points at this warehouse; the run picker shows earlier reports)",
    ])


def gc_copy(work: Path, version: str = DEMO_FLINK_VERSION) -> list[str]:
    """A relocated copy of the failed_and_orphans sample store, every file dated two days back."""
    import shutil

    sys.path.insert(0, str(PROJECT_ROOT))
    from tests.chains.support import relocate_store
    from tests.harness import get_fixture

    target = work / "gc-demo-store"
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(work / "gc-demo-warehouse", ignore_errors=True)   # idempotent re-runs start clean
    copy = relocate_store(get_fixture(version, "failed_and_orphans").root, str(target))
    old = time.time() - 2 * 86400
    for path in target.rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)
    return [f"{copy}/checkpoints", f"{copy}/savepoints"]


def compact_copy(work: Path, version: str = DEMO_FLINK_VERSION) -> list[str]:
    """A relocated copy of the inline_heavy sample store (compaction writes beside its sources)."""
    import shutil

    sys.path.insert(0, str(PROJECT_ROOT))
    from tests.chains.support import relocate_store
    from tests.harness import get_fixture

    target = work / "compact-demo-store"
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(work / "compact-demo-warehouse", ignore_errors=True)
    copy = relocate_store(get_fixture(version, "inline_heavy").root, str(target))
    return [f"{copy}/checkpoints", f"{copy}/savepoints"]


def compact_summary(warehouse: str, airflow_run_id: str) -> str:
    from statekeeper.tables import Warehouse
    from statekeeper.tables.reader import TableReader

    reader = TableReader(Warehouse(warehouse))
    run = next(r for r in reader.read("compaction_runs").to_pylist() if r["airflow_run_id"] == airflow_run_id)
    rows = [r for r in reader.read("compactions").to_pylist() if r["run_id"] == run["run_id"]]
    lines = [f"compaction {run['run_id']}: {run['status']}, {run['compacted']} snapshot(s) compacted, "
             f"{run['failed']} failed; {run['files_written']} file(s) written"]
    for r in sorted(rows, key=lambda r: r["source_metadata_uri"]):
        lines.append(f"  {r['status']:<10} _metadata {r['metadata_bytes_before']:>9,} -> "
                     f"{r['metadata_bytes_after'] or 0:>7,} bytes  {r['result_metadata_uri']}")
    for r in run["report"][:5]:
        lines.append(f"  inline: {r['job_dir'][:12]}… {r['operator_uid'] or r['operator_name'] or r['operator_id']}: "
                     f"{r['inline_bytes']:,} bytes in {r['snapshots']} snapshot(s), {r['movable_bytes']:,} movable")
    maintenance = next((r for r in reader.read("maintenance_runs").to_pylist()
                        if r["airflow_run_id"] == airflow_run_id), None)
    if maintenance is not None:
        lines.append(f"warehouse maintenance {maintenance['run_id']}: {maintenance['status']}; "
                     f"{maintenance['files_compacted']} small file(s) compacted, {maintenance['files_vacuumed']} "
                     f"vacuumed, live data files {maintenance['files_before']} -> {maintenance['files_after']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m statekeeper.dev.demo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=str(PROJECT_ROOT / ".statekeeper"),
                        help="where the demo's Airflow home and warehouse live (default: .statekeeper/)")
    args = parser.parse_args(argv)
    work = Path(args.workdir).resolve()
    warehouse = (work / "warehouse").as_uri()
    log = work / "logs" / "demo.log"
    log.unlink(missing_ok=True)
    started = time.monotonic()
    print(f"Airflow, Spark and Flink write their logs to {log}; here: a line per task and what each step found",
          flush=True)
    with console_to_file(log) as say:
        airflow = work / "airflow"
        say("1/7 sample checkpoint store (real Flink; cached after the first run)")
        roots = sample_store_roots(say=say)
        say("2/7 checkpoint_maintenance DAG (dag.test, local Spark, SQLite Airflow)")
        run_id = run_dag(roots, warehouse, airflow, log=log, say=say)
        say("3/7 summary")
        say(summarize(warehouse, run_id))
        say(gc_summary(warehouse, run_id, "garbage collection (dry run, the default)"))
        say("4/7 garbage collection for real, on a copy of the failed_and_orphans store (gc_mode=delete, "
            "older_than=1d)")
        copy_warehouse = (work / "gc-demo-warehouse").as_uri()
        gc_run = run_dag(gc_copy(work), copy_warehouse, airflow, log=log, say=say, gc_mode="delete",
                         older_than="1d")
        say(gc_summary(copy_warehouse, gc_run, "garbage collection (delete)"))
        say("5/7 disaster-recovery copy of the sample store (checkpoint_dr_copy DAG) to a second local root")
        target = (work / "dr-store").as_uri()
        # The allowlist is the deployment's guard (a Variable, never a form value); the demo deployment
        # allows its own DR directory.
        from airflow.models import Variable

        Variable.set("statekeeper_dr_allowed_targets", target)
        dr_run = run_dag([], warehouse, airflow, log=log, say=say, dag_id="checkpoint_dr_copy", targets=[target],
                         dr_warehouse=(work / "dr-warehouse").as_uri())
        say(dr_summary(warehouse, dr_run))
        say("6/7 compaction of an inline-heavy store (a copy) and warehouse maintenance (compact=true, "
            "maintain_warehouse=true)")
        compact_warehouse = (work / "compact-demo-warehouse").as_uri()
        compact_run = run_dag(compact_copy(work), compact_warehouse, airflow, log=log, say=say, compact=True,
                              compact_max_metadata_size="256KiB", maintain_warehouse=True)
        say(compact_summary(compact_warehouse, compact_run))
        say("7/7 the report of the sample store's warehouse, again now that it has a DR copy "
            "(the DR run's last task wrote it; the maintenance run's wrote one at step 2)")
        say(report_summary(warehouse, dr_run))
    print(f"demo finished in {time.monotonic() - started:.0f}s; the logs: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
