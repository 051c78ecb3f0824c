"""A DAG run's figures to the Pushgateway (and through OpenTelemetry), after its last step, from the worker.

The last Spark step of each DAG (`report` of checkpoint_maintenance and checkpoint_dr_copy, every round of
checkpoint_dr_follow's `dr_follow`) pushes when its job has ended, whatever its exit: the figures are read
from the tables (statekeeper.metrics.gather), so a failed run pushes what it left there, which is what
monitoring must see. Settings, rendered per run (statekeeper_airflow.dag_params.metrics_push):

* `conn_id`: an Airflow connection of the Pushgateway (type http: host or URL, port, schema http/https,
  login/password for basic auth); empty: nothing is pushed;
* `job`: the Pushgateway job label; `thresholds`: the alert thresholds pushed beside the figures;
* `groups`: per warehouse, the scope of figures to push and the storage connection to read it with.

Nothing here fails the task: each channel logs one line saying what it did (pushed, not configured, or why
not), and the task's own outcome stands. The connection's password is masked in the task log and never
formatted into a message; the log names the gateway by its URL without credentials.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from statekeeper.metrics.names import Scope

CONN_VARIABLE = "statekeeper_metrics_conn_id"
JOB_VARIABLE = "statekeeper_metrics_job"


@dataclass(frozen=True)
class GroupSetting:
    scope: Scope
    warehouse: str
    storage_conn_id: str = ""


def push_run_figures(settings: dict[str, Any], dag_id: str, log: logging.Logger | Any) -> None:
    """Gather every group's figures and push them; logs one line per channel, never raises."""
    try:
        _push(settings, dag_id, log)
    except Exception as exc:   # noqa: BLE001 - metrics never fail a run
        log.warning("metrics: not pushed: %s: %s", type(exc).__name__, exc)


def _push(settings: dict[str, Any], dag_id: str, log: Any) -> None:
    from statekeeper.metrics.push import Group, push
    from statekeeper.metrics.settings import DEFAULT_JOB_LABEL, Thresholds

    conn_id = str(settings.get("conn_id") or "").strip()
    otel = _otel_target(log)
    if not conn_id and otel is None:
        log.info("metrics: no Pushgateway configured (the form's metrics_conn_id and the Variable %s are empty): "
                 "nothing pushed", CONN_VARIABLE)
        return
    gateway = _gateway(conn_id, log) if conn_id else None
    if gateway is None and otel is None:
        return
    thresholds, problems = Thresholds.parse(settings.get("thresholds") or {})
    for problem in problems:
        log.warning("metrics: %s", problem)
    job = str(settings.get("job") or "").strip() or DEFAULT_JOB_LABEL
    gathered = [(Group(job, dag_id, found[0]), found[1]) for g in _groups(settings)
                if (found := _gather(g, thresholds, log)) is not None]
    if not gathered:
        return
    where = "; ".join(group.warehouse for group, _ in gathered)
    series = sum(len(samples) for _, samples in gathered)
    if gateway is not None:
        failed = [(group, outcome) for group, samples in gathered
                  if not (outcome := push(gateway, group, samples)).pushed]
        if failed:
            log.warning("metrics: the Pushgateway %s did not take the figures of %s (%s); the run goes on without "
                        "them", gateway.url, "; ".join(g.warehouse for g, _ in failed), failed[0][1].message)
        else:
            log.info("metrics: pushed %d series to the Pushgateway %s (job=%s, dag=%s, warehouse %s)", series,
                     gateway.url, job, dag_id, where)
    if otel is not None:
        from statekeeper.metrics.otel import export

        outcomes = [export(otel, group, samples) for group, samples in gathered]
        bad = [o for o in outcomes if not o.pushed]
        if bad:
            log.warning("metrics: OpenTelemetry export to %s failed (%s); the run goes on without it",
                        otel.describe(), bad[0].message)
        else:
            log.info("metrics: exported %d series through OpenTelemetry to %s (service %s, dag=%s, warehouse %s)",
                     series, otel.describe(), otel.service_name, dag_id, where)


def _groups(settings: dict[str, Any]) -> list[GroupSetting]:
    out = []
    for g in settings.get("groups") or ():
        warehouse = str(g.get("warehouse") or "").strip()
        if warehouse:
            out.append(GroupSetting(Scope(g["scope"]), warehouse, str(g.get("storage_conn_id") or "").strip()))
    return out


def _gather(group: GroupSetting, thresholds: Any, log: Any) -> tuple[str, list[Any]] | None:
    """The warehouse's canonical URI (the group's label: one group however a setting spells it) and its figures."""
    from statekeeper.metrics.gather import gather
    from statekeeper.storage import StorageConfig
    from statekeeper.tables import Warehouse
    from statekeeper_airflow.connections import connection_env

    try:
        storage = StorageConfig.from_env(connection_env(group.storage_conn_id)) if group.storage_conn_id \
            else StorageConfig.from_env()
        warehouse = Warehouse(group.warehouse, storage)
        return warehouse.uri, gather(warehouse, group.scope, thresholds)
    except Exception as exc:   # noqa: BLE001 - a warehouse that cannot be read is one line, not a failed run
        log.warning("metrics: could not read the %s figures of warehouse %s (%s: %s); not pushed", group.scope.value,
                    group.warehouse, type(exc).__name__, exc)
        return None


def _gateway(conn_id: str, log: Any) -> Any:
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    from statekeeper.metrics.push import Gateway

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:   # noqa: BLE001 - Airflow raises its own not-found type
        log.warning("metrics: the Pushgateway connection %r is not defined (create it, or empty the Variable %s): "
                    "nothing pushed", conn_id, CONN_VARIABLE)
        return None
    if conn.password:
        mask_secret(conn.password)
    try:
        return Gateway.from_connection(conn.host or "", conn.port, conn.schema or None, conn.login or None,
                                       conn.password or None)
    except ValueError as exc:
        log.warning("metrics: connection %r: %s: nothing pushed", conn_id, exc)
        return None


def _otel_target(log: Any) -> Any:
    """Where OpenTelemetry metrics go when Airflow's `[metrics] otel_on` is set, else None."""
    from airflow.configuration import conf

    if not conf.getboolean("metrics", "otel_on", fallback=False):
        return None
    from statekeeper.metrics.otel import OtelTarget

    port = conf.get("metrics", "otel_port", fallback="") or None
    try:
        return OtelTarget.resolve(host=conf.get("metrics", "otel_host", fallback="") or None,
                                  port=int(port) if port else None,
                                  ssl_active=conf.getboolean("metrics", "otel_ssl_active", fallback=False),
                                  service_name=conf.get("metrics", "otel_service", fallback="") or None)
    except ValueError as exc:
        log.warning("metrics: OpenTelemetry: %s; nothing exported through it", exc)
        return None
