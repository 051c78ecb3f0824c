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
