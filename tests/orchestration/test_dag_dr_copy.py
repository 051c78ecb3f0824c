"""The DR copy DAG: its asset schedule, its shape, its form, and what each task passes its job.

Arguments are rendered the way a worker renders them (tests.orchestration.support.render_task: the Task
SDK's RuntimeTaskInstance, real param validation, Variables as AIRFLOW_VAR_* environment variables,
XComs answered as a worker's supervisor answers them) and then parsed by the entry points' own
parsers, so a template that renders but does not parse fails here:

* the allowlist is always the Variable statekeeper_dr_allowed_targets, whatever a run's conf says;
* an empty snapshot list renders one empty `--snapshot=` token that the entry point takes as "none";
* target_index indexes the `target_roots` of dr_copy's result, into the DR warehouse;
* keep becomes target_gc's --retain-last (the form for manual runs, the Variable otherwise), and the
  gc mode is a dry run unless a Variable (or a manual run's form) says delete.
"""
from __future__ import annotations

import importlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.orchestration.support import FakeSupervisor, plugin_module, render_task

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
STARTED = datetime(2026, 3, 1, 2, 30, 7, tzinfo=timezone.utc)
DAG_ID = "checkpoint_dr_copy"
DR_VARIABLES = {
    "statekeeper_warehouse": "file:///var/warehouse",
    "statekeeper_dr_targets": "file:///dr/store",
    "statekeeper_dr_allowed_targets": "file:///dr/store,s3://dr-bucket/flink",
    "statekeeper_dr_warehouse": "file:///dr/warehouse",
    "statekeeper_dr_keep": None,
    "statekeeper_dr_gc_mode": None,
    "statekeeper_dr_gc_older_than": None,
    "statekeeper_dr_storage_conn_id": None,
}
COPY_RESULT = {
    "status": "succeeded",
    "target_roots": ["file:///dr/store/checkpoints", "file:///dr/store/savepoints"],
    "targets": {"file:///src/checkpoints": "file:///dr/store/checkpoints",
                "file:///src/savepoints": "file:///dr/store/savepoints"},
}


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag


@pytest.fixture(scope="module")
def dag(dagbag):
    return dagbag.dags[DAG_ID]


@pytest.fixture
def variables(monkeypatch):
    """The Variables a deployment sets (DR_VARIABLES; None: unset); set_(name=value) changes them."""
    def set_(**values: str | None) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(f"AIRFLOW_VAR_{name.upper()}", raising=False)
            else:
                monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", value)

    set_(**DR_VARIABLES)
    return set_


def render(dag, task_id: str, run_type: str, conf: dict | None = None, xcoms: dict | None = None) -> dict:
    supervisor = FakeSupervisor({"dr_copy": COPY_RESULT} if xcoms is None else xcoms)
    return render_task(dag, task_id, run_type, conf, started=STARTED, supervisor=supervisor)


def entry_point(name: str):
    return importlib.import_module(f"spark_jobs.{name}")


def copy_options(args: list[str]):
    """What copy_to_dr makes of the arguments: its parser, then its options (checked as its preflight does)."""
    from statekeeper.replicate.entry import ENTRY

    job = entry_point("copy_to_dr")
    options = ENTRY.options(job.parser().parse_args(args))
    options.check()
    return options


# -- shape ------------------------------------------------------------------------------------------

def test_parses_with_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert DAG_ID in dagbag.dags


def test_scheduled_on_the_asset_validate_publishes(dagbag, dag):
    asset = plugin_module("assets").VALIDATION_JOBS
    assert (asset.name, asset.uri) == ("statekeeper_validation_jobs", "x-statekeeper://warehouse/validation_jobs")
    # The URI is a valid Airflow asset URI that Airflow keeps verbatim.
    from airflow.sdk import Asset

    assert Asset(name=asset.name, uri=asset.uri).uri == asset.uri
    assert [(a.name, a.uri) for a in dag.schedule] == [(asset.name, asset.uri)]
    assert [(a.name, a.uri) for a in dag.timetable.asset_condition.objects] == [(asset.name, asset.uri)]
    validate = dagbag.dags["checkpoint_maintenance"].get_task("validate")
    assert [(a.name, a.uri) for a in validate.outlets] == [(asset.name, asset.uri)]
    # No other task of the maintenance DAG publishes it (gc runs after validate; a DR copy need not wait).
    others = [t.task_id for t in dagbag.dags["checkpoint_maintenance"].tasks if t.outlets and t.task_id != "validate"]
    assert others == []


def test_asset_schedule_survives_serialization(dagbag):
    """What the DAG processor stores and the scheduler reads."""
    from airflow.serialization.serialized_objects import DagSerialization

    dr = DagSerialization.from_dict(DagSerialization.to_dict(dagbag.dags[DAG_ID]))
    assert [a.uri for _, a in dr.timetable.asset_condition.iter_assets()] == [
        "x-statekeeper://warehouse/validation_jobs"]
    maintenance = DagSerialization.from_dict(DagSerialization.to_dict(dagbag.dags["checkpoint_maintenance"]))
    assert [a.name for a in maintenance.get_task("validate").outlets] == ["statekeeper_validation_jobs"]


def test_dag_shape(dag):
    from statekeeper.jobs import registry

    assert dag.max_active_runs == 1 and dag.catchup is False
    assert dag.is_paused_upon_creation is True
    for phrase in ("allowlist", "statekeeper_dr_allowed_targets", "validate", "succeeds", "Retention",
                   "Trigger", "all_success"):
        assert phrase in dag.doc_md, phrase
    jobs = {"dr_copy": registry.DR, "target_index": registry.INDEX, "target_chains": registry.CHAINS,
            "target_gc": registry.GC, "report": registry.REPORT}
    # the steps run in one shared Spark driver (statekeeper.launch.warm_driver) with the retention steps' settings
    order = ["spark_driver", "dr_copy", "target_index", "target_chains", "target_gc", "report"]
    assert [t.task_id for t in dag.topological_sort()][:len(order)] == order
    for upstream, downstream in zip(order[:-1], order[1:]):
        assert dag.get_task(downstream).upstream_task_ids == {upstream}
    driver, stop_driver = dag.get_task("spark_driver"), dag.get_task("stop_spark_driver")
    assert driver.is_setup and stop_driver.is_teardown and stop_driver.upstream_task_ids == {"report", "spark_driver"}
    assert driver.storage_conn_id == dag.get_task("target_index").storage_conn_id
    assert dag.get_task("target_gc").downstream_task_ids == {"report", "run_outcome"}
    # The report of the source warehouse (its dr_runs and dr_copies) after every step whatever happened, and
    # a leaf that keeps a run with a failed step failed (a successful report would be its only leaf).
    report, outcome = dag.get_task("report"), dag.get_task("run_outcome")
    assert report.trigger_rule == "all_done" and report.storage_conn_id == dag.get_task("dr_copy").storage_conn_id
    assert outcome.upstream_task_ids == set(jobs) and outcome.trigger_rule == "one_failed"
    assert dag.get_task("report").downstream_task_ids == {"stop_spark_driver", "run_outcome"}
    for task_id, spec in jobs.items():
        task = dag.get_task(task_id)
        assert Path(task.application) == ROOT / "spark_jobs" / f"{spec.entry_point}.py"
        assert task.final_exit_codes == spec.final_exit_codes
        assert task.pool == "statekeeper_spark"
        assert task.retries == 2 and task.retry_exponential_backoff and task.retry_delay == timedelta(minutes=2)
        # A copy run with a failed snapshot (exit 1) never leads to a deletion at the target.
        assert task.trigger_rule == ("all_done" if task_id == "report" else "all_success")
        assert task.doc_md
    assert dag.get_task("dr_copy").final_exit_codes == (1, 2)


def test_params_form(dag):
    schema = {k: dag.params.get_param(k).schema for k in dag.params}
    param = dag.params.get_param
    for key in ("targets", "snapshots"):
        assert schema[key]["type"] == "array" and schema[key]["items"] == {"type": "string"}
        assert dag.params[key] == []
    assert schema["savepoints"]["enum"] == ["none", "newest", "all"] and dag.params["savepoints"] == "newest"
    assert schema["verify"]["enum"] == ["size", "checksum"] and dag.params["verify"] == "size"
    assert schema["mode"]["enum"] == ["copy", "verify"] and dag.params["mode"] == "copy"
    assert schema["gc_mode"]["enum"] == ["plan", "delete"] and dag.params["gc_mode"] == "plan"
    assert schema["include_external"]["type"] == "boolean" and dag.params["include_external"] is False
    assert schema["keep"]["type"] == "integer" and schema["keep"]["minimum"] == 1 and dag.params["keep"] == 3
    for key in ("job_filter", "warehouse", "dr_warehouse", "storage_conn_id", "dr_storage_conn_id", "spark_master"):
        assert schema[key]["type"] == "string" and dag.params[key] == "", key
    assert dag.params["spark_conn_id"] == "spark_local"
    for key in dag.params:
        assert param(key).description and schema[key].get("title"), key
    # The allowlist is not a form field.
    assert not any("allow" in key for key in dag.params)


# -- dr_copy ----------------------------------------------------------------------------------------

def test_scheduled_copy_follows_the_variables(dag, variables):
    fields = render(dag, "dr_copy", "asset_triggered")
    args = fields["job_args"]
    assert args == [
        "--warehouse", "file:///var/warehouse",
        "--run-id", "asset_triggered__2026-03-01T02:00:00+00:00",
        "--target=file:///dr/store",
        "--allowed-targets=file:///dr/store,s3://dr-bucket/flink",
        "--mode=copy",
        "--savepoints=newest",
        "--snapshot=",
        "--job-filter=",
        "--verify=size",
        "--include-external=false",
    ]
    options = copy_options(args)
    assert options.targets.base == "file:///dr/store" and options.targets.pairs == ()
    assert options.allowed_targets == ("file:///dr/store", "s3://dr-bucket/flink")
    assert options.snapshots == ()  # the empty --snapshot= means none given
    assert (options.mode.value, options.savepoints.value, options.verify.value) == ("copy", "newest", "size")
    assert options.job_filter is None and options.include_external is False
    assert (fields["storage_conn_id"], fields["target_storage_conn_id"]) == ("", "")
    assert (fields["spark_conn_id"], fields["spark_master"]) == ("spark_local", "")
    # The DR connection from its Variable.
    variables(statekeeper_dr_storage_conn_id="dr_s3")
    assert render(dag, "dr_copy", "asset_triggered")["target_storage_conn_id"] == "dr_s3"


def test_manual_copy_takes_the_form(dag, variables):
    conf = {
        "targets": ["file:///src/checkpoints=s3://dr-bucket/flink/cp", "s3://dr-bucket/flink/base"],
        "snapshots": ["file:///src/checkpoints/job-a/chk-7", "file:///src/savepoints/sp-1/_metadata"],
        "job_filter": "job-*", "savepoints": "all", "verify": "checksum", "mode": "verify",
        "include_external": True, "warehouse": "/wh", "storage_conn_id": "src_s3", "dr_storage_conn_id": "dr_s3",
        "spark_conn_id": "spark_other", "spark_master": "local[3]",
    }
    fields = render(dag, "dr_copy", "manual", conf)
    args = fields["job_args"]
    assert args[:4] == ["--warehouse", "/wh", "--run-id", "manual__2026-03-01T02:00:00+00:00"]
    options = copy_options(args)
    assert options.targets.pairs == (("file:///src/checkpoints", "s3://dr-bucket/flink/cp"),)
    assert options.targets.base == "s3://dr-bucket/flink/base"
    assert options.snapshots == ("file:///src/checkpoints/job-a/chk-7/_metadata", "file:///src/savepoints/sp-1/_metadata")
    assert (options.mode.value, options.savepoints.value, options.verify.value) == ("verify", "all", "checksum")
    assert options.job_filter == "job-*" and options.include_external is True
    assert (fields["storage_conn_id"], fields["target_storage_conn_id"]) == ("src_s3", "dr_s3")
    assert (fields["spark_conn_id"], fields["spark_master"]) == ("spark_other", "local[3]")
    # Every argument is one token and nothing renders as None.
    assert all(a.strip() and "None" not in a for a in args), args


def test_allowlist_is_always_the_variable(dag, variables):
    """A run's conf cannot widen the allowlist: it is not a form field and no template reads conf for it;
    a target outside the Variable's prefixes is refused by the entry point before anything is copied."""
    from statekeeper.replicate.options import DrOptionsError

    conf = {"targets": ["s3://elsewhere/flink"], "allowed_targets": ["s3://elsewhere"],
            "allowed": "s3://elsewhere", "statekeeper_dr_allowed_targets": "s3://elsewhere"}
    for run_type in ("manual", "asset_triggered"):
        args = render(dag, "dr_copy", run_type, conf)["job_args"]
        assert [a for a in args if a.startswith("--allowed-targets")] == [
            "--allowed-targets=file:///dr/store,s3://dr-bucket/flink"], (run_type, args)
        with pytest.raises(DrOptionsError, match="not below any allowed target prefix"):
            copy_options(args)
    # Unset Variable: an empty allowlist, which the entry point refuses (exit 2), never "anything goes".
    variables(statekeeper_dr_allowed_targets=None)
    args = render(dag, "dr_copy", "manual", {"targets": ["file:///dr/store"]})["job_args"]
    assert "--allowed-targets=" in args
    with pytest.raises(DrOptionsError, match="no target allowlist"):
        copy_options(args)


def test_empty_snapshots_mean_none_given(dag, variables):
    for conf in (None, {"snapshots": []}):
        args = render(dag, "dr_copy", "manual", conf)["job_args"]
        assert [a for a in args if a.startswith("--snapshot")] == ["--snapshot="]
        assert copy_options(args).snapshots == ()


def test_include_external_flag_forms_parse():
    """The DAG's `--include-external=true|false` and the bare flag both work."""
    parser = entry_point("copy_to_dr").parser()
    base = ["--warehouse", "/wh", "--target", "file:///dr", "--allowed-targets", "file:///dr"]
    assert parser.parse_args(base).include_external is False
    assert parser.parse_args([*base, "--include-external"]).include_external is True
    assert parser.parse_args([*base, "--include-external=true"]).include_external is True
    assert parser.parse_args([*base, "--include-external=false"]).include_external is False
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--include-external=maybe"])


# -- retention at the target ------------------------------------------------------------------------

def test_target_index_indexes_what_dr_copy_wrote(dag, variables):
    fields = render(dag, "target_index", "asset_triggered")
    args = fields["job_args"]
    index = entry_point("index_checkpoints")
    parsed = index.parser().parse_args(args)
    from statekeeper.launch import entrypoint as ep

    assert ep.roots_from(parsed) == COPY_RESULT["target_roots"]
    assert parsed.warehouse == "file:///dr/warehouse"
    assert parsed.airflow_run_id == "asset_triggered__2026-03-01T02:00:00+00:00"
    assert parsed.allow_empty_root is True
    assert parsed.job_filter == ""
    assert (parsed.data_interval_start, parsed.data_interval_end) == (None, None)
    # A manual run's DR warehouse from the form.
    args = render(dag, "target_index", "manual", {"dr_warehouse": "/dr-wh"})["job_args"]
    assert index.parser().parse_args(args).warehouse == "/dr-wh"


def test_target_index_without_a_copy_result_indexes_nothing(dag, variables):
    """No XCom (a cluster-mode driver returns none): an empty --roots, which the index refuses."""
    from statekeeper.launch import entrypoint as ep

    for xcoms in ({}, {"dr_copy": {"status": "failed"}}):
        args = render(dag, "target_index", "asset_triggered", xcoms=xcoms)["job_args"]
        assert args[:2] == ["--roots", ""]
        assert ep.roots_from(entry_point("index_checkpoints").parser().parse_args(args)) == []


def test_retention_steps_use_the_dr_store(dag, variables):
    """The DR connection (form, else Variable), else the source's, like dr_copy's own fallback."""
    for task_id in ("target_index", "target_chains", "target_gc"):
        assert render(dag, task_id, "asset_triggered")["storage_conn_id"] == ""
        assert render(dag, task_id, "manual", {"storage_conn_id": "src_s3"})["storage_conn_id"] == "src_s3"
        assert render(dag, task_id, "manual", {"storage_conn_id": "src_s3", "dr_storage_conn_id": "dr_s3"}
                      )["storage_conn_id"] == "dr_s3"
    variables(statekeeper_dr_storage_conn_id="dr_var")
    for task_id in ("target_index", "target_chains", "target_gc"):
        assert render(dag, task_id, "asset_triggered")["storage_conn_id"] == "dr_var"
    chains = render(dag, "target_chains", "asset_triggered")["job_args"]
    parsed = entry_point("compute_chains").parser().parse_args(chains)
    assert parsed.warehouse == "file:///dr/warehouse"


def test_report_rewrites_the_source_warehouses_page_with_the_sources_settings(dag, variables):
    """The DR run's report is the source warehouse's (where dr_copy records dr_runs and dr_copies), reached
    with the source's connection whatever the DR store's is."""
    parsed = entry_point("build_report").parser().parse_args(render(dag, "report", "asset_triggered")["job_args"])
    assert parsed.warehouse == DR_VARIABLES["statekeeper_warehouse"]
    assert parsed.airflow_run_id == "asset_triggered__2026-03-01T02:00:00+00:00"
    args = render(dag, "report", "manual", {"warehouse": "/src-wh"})["job_args"]
    assert entry_point("build_report").parser().parse_args(args).warehouse == "/src-wh"
    both = {"storage_conn_id": "src_s3", "dr_storage_conn_id": "dr_s3"}
    assert render(dag, "report", "manual", both)["storage_conn_id"] == "src_s3"
    variables(statekeeper_dr_storage_conn_id="dr_var")
    assert render(dag, "report", "asset_triggered")["storage_conn_id"] == ""


def gc_args(dag, run_type: str, conf: dict | None = None):
    args = render(dag, "target_gc", run_type, conf)["job_args"]
    return args, entry_point("collect_garbage").parser().parse_args(args)


def test_scheduled_target_gc_follows_the_variables(dag, variables):
    args, parsed = gc_args(dag, "asset_triggered")
    assert args == [
        "--warehouse", "file:///dr/warehouse",
        "--run-id", "asset_triggered__2026-03-01T02:00:00+00:00",
        "--index-not-before=2026-03-01T02:30:07+00:00",
        "--mode=plan",
        "--older-than=3d",
        "--retain-last=3",
    ]
    assert (parsed.mode, parsed.retain_last, parsed.older_than) == ("plan", 3, timedelta(days=3))
    assert parsed.index_not_before == STARTED
    assert parsed.expire_savepoints_older_than is None and parsed.execute == ""
    variables(statekeeper_dr_keep="5", statekeeper_dr_gc_mode="delete", statekeeper_dr_gc_older_than="12h")
    _, parsed = gc_args(dag, "asset_triggered")
    assert (parsed.mode, parsed.retain_last, parsed.older_than) == ("delete", 5, timedelta(hours=12))
    # A non-manual run never takes keep or mode from conf.
    _, parsed = gc_args(dag, "asset_triggered", {"keep": 1, "gc_mode": "plan"})
    assert (parsed.mode, parsed.retain_last) == ("delete", 5)
    variables(statekeeper_dr_keep=None, statekeeper_dr_gc_mode=None)
    _, parsed = gc_args(dag, "operator_triggered", {"keep": 1, "gc_mode": "delete"})
    assert (parsed.mode, parsed.retain_last) == ("plan", 3)


def test_manual_target_gc_takes_keep_and_mode_from_the_form(dag, variables):
    variables(statekeeper_dr_keep="7", statekeeper_dr_gc_mode="delete")  # the form wins
    _, parsed = gc_args(dag, "manual", {"keep": 2})
    assert (parsed.retain_last, parsed.mode) == (2, "plan")
    _, parsed = gc_args(dag, "manual", {"keep": 4, "gc_mode": "delete", "dr_warehouse": "/dr-wh"})
    assert (parsed.retain_last, parsed.mode, parsed.warehouse) == (4, "delete", "/dr-wh")
    _, parsed = gc_args(dag, "manual")
    assert parsed.retain_last == 3  # the form's default


def test_keep_must_be_positive(dag, variables):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        gc_args(dag, "manual", {"keep": 0})
