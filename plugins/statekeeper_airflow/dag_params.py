"""The vocabulary both Statekeeper DAGs speak: form fields (Params) and the argument templates that read them.

One place, so that the maintenance and DR DAGs cannot drift apart in what a field means, which
Variable a scheduled run falls back to, or a default (GC's grace period is `statekeeper.defaults`'s,
spelled here for the templates). A template is Jinja rendered by the worker; every argument stays one
token, and an unset value renders as an empty one, which the entry points take as "not given".
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import Param
from statekeeper.defaults import GC_GRACE_TEXT
from statekeeper.metrics import settings as metrics_settings
from statekeeper.metrics.names import Scope

# Scheduled and backfill runs follow the Variables (a deployment decides there, once); only a manual
# run takes the form's values for what can delete or write elsewhere.
MANUAL = "dag_run.run_type == 'manual'"

RUN_ID = ["--run-id", "{{ run_id }}"]
# Manual runs triggered without a logical date have no data interval (the names are undefined).
DATA_INTERVAL = [
    "--data-interval-start", "{{ data_interval_start | ts if data_interval_start is defined and data_interval_start else '' }}",
    "--data-interval-end", "{{ data_interval_end | ts if data_interval_end is defined and data_interval_end else '' }}",
]
# gc plans from the newest succeeded index run; this run's own index finished after the run started, so a
# newest index run that finished before then is stale and gc refuses to delete.
INDEX_NOT_BEFORE = "--index-not-before={{ (dag_run.start_date or dag_run.run_after) | ts }}"

# What a storage connection may be (statekeeper_airflow.operators.STORAGE_CONN_TYPES maps each).
CONNECTION_TYPES = ("'aws' for s3:// (e.g. statekeeper_s3_local), 'google_cloud_platform' for gs://, 'wasb' or "
                    "'adls' for abfss:// (docs/storage-schemes.md)")

# The DR DAGs' targets: a form value, else the Variable; the allowlist is the deployment's guard, the
# Variable only, whatever a run's conf says; the DR store's connection (empty: the source's settings).
DR_TARGETS = ("--target={{ (params.targets | join(',')) if params.targets "
              "else var.value.get('statekeeper_dr_targets', '') }}")
DR_ALLOWED_TARGETS = "--allowed-targets={{ var.value.get('statekeeper_dr_allowed_targets', '') }}"
DR_CONN = "(params.dr_storage_conn_id or var.value.get('statekeeper_dr_storage_conn_id', ''))"
# A copy_to_dr task's connections: the source's from the form, the DR store's as above.
DR_CONNECTIONS = {"storage_conn_id": "{{ params.storage_conn_id }}", "target_storage_conn_id": "{{ " + DR_CONN + " }}"}


def form_or_variable(param: str, variable: str) -> str:
    """The form's value, else the Variable (what scheduled runs use)."""
    return f"{{{{ params.{param} or var.value.{variable} }}}}"


def manual_or_variable(param: str, variable: str, default: str) -> str:
    """A Jinja expression: the form's value on a manual run, the Variable on any other, else `default`."""
    return f"((params.{param} if {MANUAL} else var.value.get('{variable}', '')) or '{default}')"


def optional(option: str, param: str) -> str:
    """`--option=<param>`, with an empty value when the param is unset (None or '')."""
    return f"--{option}={{{{ params.{param} if params.{param} is not none else '' }}}}"


def flag_arg(option: str, condition: str) -> str:
    """`--option=true|false` from a Jinja condition (the entry points read both spellings)."""
    return f"--{option}={{{{ 'true' if {condition} else 'false' }}}}"


def gc_mode_arg(variable: str) -> str:
    """`--mode=plan|delete` for a gc task: the form's on a manual run, else the Variable, else plan."""
    return f"--mode={{{{ {manual_or_variable('gc_mode', variable, 'plan')} | trim }}}}"


def gc_older_than_arg(variable: str, param: str | None = None) -> str:
    """`--older-than=` for a gc task: the form's `param` on a manual run (when the DAG has one), else
    the Variable, else GC's own default."""
    form = f"(params.{param} if {MANUAL} else '') or " if param else ""
    return f"--older-than={{{{ ({form}var.value.get('{variable}', '') or '{GC_GRACE_TEXT}') | trim }}}}"


# -- form fields ------------------------------------------------------------------------------------

def text(title: str, description: str, default: str = "", **schema: Any) -> Param:
    return Param(default, type="string", title=title, description=description, **schema)


def flag(title: str, description: str) -> Param:
    return Param(False, type="boolean", title=title, description=description)


def choice(default: str, choices: list[str], title: str, description: str) -> Param:
    return Param(default, type="string", enum=choices, title=title, description=description)


def uri_list(title: str, description: str) -> Param:
    return Param([], type="array", items={"type": "string"}, title=title, description=description)


def warehouse(description: str) -> Param:
    return text("Warehouse", f"{description} Empty: the Variable statekeeper_warehouse.")


def job_filter(what: str) -> Param:
    return text("Job filter", f"Only {what} whose name matches this glob (e.g. 'a1b2*'). Empty: all jobs.")


def storage_connection(title: str, what: str, empty: str) -> Param:
    return text(title, f"{what}: {CONNECTION_TYPES}. {empty}")


def gc_mode(title: str, description: str) -> Param:
    """A gc task's mode (`gc_mode_arg` reads it on manual runs): a dry run unless asked."""
    return choice("plan", ["plan", "delete"], title, description)


def spark() -> dict[str, Param]:
    """The form fields that pick the cluster a run submits to."""
    return {
        "spark_conn_id": text("Spark connection", "The Spark connection whose master spark-submit uses.",
                              "spark_local"),
        "spark_master": text("Spark master override",
                             "Overrides the connection's master for this run, e.g. local[2] or spark://host:7077."),
    }


# -- metrics (docs/metrics.md): pushed by each DAG's last step --------------------------------------------------

def _setting(param: str, variable: str) -> str:
    """The form's value when the DAG's form has the field and it is set, else the Variable, else ''."""
    return f"{{{{ params.get('{param}') or var.value.get('{variable}', '') }}}}"


def metrics_push(*groups: tuple[Scope, str, str]) -> dict[str, Any]:
    """The `metrics` setting of a DAG's last step (StatekeeperSparkSubmitOperator, statekeeper_airflow.metrics_push):
    the Pushgateway connection, the job label and the thresholds (form, else Variable, else the defaults of
    statekeeper.metrics.settings), and per warehouse the scope of figures (statekeeper.metrics.names.Scope) and
    the storage connection to read it with, each as (scope, warehouse template, storage connection template)."""
    return {
        "conn_id": _setting("metrics_conn_id", "statekeeper_metrics_conn_id"),
        "job": _setting("metrics_job", "statekeeper_metrics_job"),
        "thresholds": {name: _setting(f"alert_{name}", variable)
                       for name, variable in metrics_settings.VARIABLES.items()},
        "groups": [{"scope": Scope(scope).value, "warehouse": where, "storage_conn_id": conn}
                   for scope, where, conn in groups],
    }


def metrics(*thresholds: str) -> dict[str, Param]:
    """The form fields of the run's metrics: the Pushgateway connection, the job label and `thresholds` (names of
    statekeeper.metrics.settings.VARIABLES: the ones this DAG's figures are judged by)."""
    s = metrics_settings
    described = {
        "index_age": ("Alert: index older than", "Alert when the newest successful index run is older than this "
                      f"(e.g. 26h). Empty: the Variable statekeeper_alert_index_age, else {s.INDEX_AGE_TEXT}."),
        "gc_age": ("Alert: GC older than", "Alert when the newest successful GC run is older than this. Empty: the "
                   f"Variable statekeeper_alert_gc_age, else {s.GC_AGE_TEXT}."),
        "dr_rpo": ("Alert: DR recovery point older than", "Alert when a job's newest checkpoint with a verified DR "
                   f"copy is older than this (the RPO). Empty: the Variable statekeeper_alert_dr_rpo, else "
                   f"{s.DR_RPO_TEXT}."),
        "follow_refusals": ("Alert: follow refusals in a row", "Alert when follow rounds refused the same job this "
                            "many times in a row. Empty: the Variable statekeeper_alert_follow_refusals, else "
                            f"{s.FOLLOW_REFUSALS}."),
    }
    fields = {
        "metrics_conn_id": text("Metrics: Pushgateway connection", "An 'http' connection to a Prometheus Pushgateway "
                                "(host or URL, port, login/password for basic auth) that the run's last step pushes "
                                "its figures to (docs/metrics.md). Empty: the Variable statekeeper_metrics_conn_id; "
                                "both empty: nothing is pushed."),
        "metrics_job": text("Metrics: job label", "The Pushgateway's job label of the pushed figures. Empty: the "
                            f"Variable statekeeper_metrics_job, else {s.DEFAULT_JOB_LABEL}."),
    }
    for name in thresholds:
        title, description = described[name]
        fields[f"alert_{name}"] = text(title, description)
    return fields
