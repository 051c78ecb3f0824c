"""Airflow connections as the environment variables statekeeper.storage reads: an 'aws', 'google_cloud_platform',
'wasb' or 'adls' connection's fields mapped onto the names statekeeper.storage_env spells (stdlib only, so DAG parsing
imports nothing but it), with a prefix for a second store (the DR target's STATEKEEPER_DR_* names), and their secrets
masked in the task log as soon as they are read.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret
from statekeeper import storage_env as env_names



# The target store's variables carry this prefix (statekeeper.storage_env.prefixed_env_name spells
# them: STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT, AWS_REGION -> STATEKEEPER_DR_AWS_REGION).
# Every name below comes from statekeeper.storage_env, which StorageConfig reads with: stdlib only, so
# DAG parsing still imports nothing but it and the registry.
DR_ENV_PREFIX = env_names.DR_PREFIX


# Variables whose values are secrets (masked in task logs), without any prefix.
SECRET_ENV = env_names.SECRET_NAMES


# Connection types storage_env_from_connection maps, and what each reaches.
STORAGE_CONN_TYPES = {
    "aws": "s3:// (and S3-compatible endpoints)", "s3": "s3://",
    "google_cloud_platform": "gs://",
    "wasb": "abfss:// / wasbs:// (Azure Blob storage)", "adls": "abfss:// (Azure Data Lake Storage Gen2)",
}


class StatekeeperConfigError(Exception):
    """A connection or parameter the Statekeeper task needs is missing or malformed."""


def storage_env_from_connection(conn_type: str, login: str | None, password: str | None,
                                extra: dict[str, Any], *, prefix: str = "", host: str | None = None) -> dict[str, str]:
    """Map an Airflow connection onto the environment variables statekeeper.storage reads; with a
    `prefix` (DR_ENV_PREFIX), the target store's names (AWS_REGION -> STATEKEEPER_DR_AWS_REGION,
    STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT).

    Types: 'aws' (login = access key id, password = secret key; extra endpoint_url, region_name,
    addressing_style), 'google_cloud_platform' (extra key_path or keyfile_dict, project; for an emulator
    endpoint and anonymous), 'wasb' (login = account name, password = account key; extra shared_access_key,
    sas_token, connection_string, endpoint) and 'adls' (host = account name, extra account_key, sas_token,
    connection_string, endpoint; a service principal needs azure-identity and is refused)."""
    if conn_type == "google_cloud_platform":
        env = _gcs_env(extra)
    elif conn_type in ("wasb", "adls"):
        env = _azure_env(conn_type, login, password, extra, host)
    elif conn_type in ("aws", "s3"):
        env = _s3_env(login, password, extra)
    else:
        param = "target_storage_conn_id" if prefix else "storage_conn_id"
        kinds = ", ".join(f"'{k}' ({v})" for k, v in STORAGE_CONN_TYPES.items())
        raise StatekeeperConfigError(
            f"{'target ' if prefix else ''}storage connection has type {conn_type!r}; Statekeeper reads storage "
            f"settings from connections of type {kinds}. Leave {param} empty for local or NFS paths."
        )
    return {env_names.prefixed_env_name(k, prefix): v for k, v in env.items()}


def _extra(extra: dict[str, Any], *names: str) -> Any:
    """The first non-empty extra among `names`, also in the old `extra__<type>__<name>` spelling."""
    for name in names:
        for key, value in extra.items():
            if (key == name or key.endswith("__" + name)) and value not in (None, ""):
                return value
    return None


def _gcs_env(extra: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    key_path = _extra(extra, "key_path")
    keyfile = _extra(extra, "keyfile_dict")
    if key_path and keyfile:
        raise StatekeeperConfigError("google_cloud_platform connection has both key_path and keyfile_dict; keep one")
    if key_path:
        env[env_names.GCS_CREDENTIALS_FILE] = str(key_path)
    if keyfile:
        env[env_names.GCS_CREDENTIALS_JSON] = keyfile if isinstance(keyfile, str) else json.dumps(keyfile)
    if _extra(extra, "key_secret_name") or _extra(extra, "credential_config_file"):
        raise StatekeeperConfigError("google_cloud_platform connection: Secret Manager keys and workload identity "
                                     "federation files are not supported; give key_path or keyfile_dict")
    project = _extra(extra, "project", "project_id")
    if project:
        env[env_names.GCS_PROJECT] = str(project)
    endpoint = _extra(extra, "endpoint", "api_endpoint")
    if endpoint:
        env[env_names.GCS_ENDPOINT] = str(endpoint)
    anonymous = _extra(extra, "anonymous")
    if anonymous is not None:
        env[env_names.GCS_ANONYMOUS] = str(anonymous).lower()
    return env


def _azure_env(conn_type: str, login: str | None, password: str | None, extra: dict[str, Any],
               host: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    parsed: dict[str, str] = {}
    conn_string = _extra(extra, "connection_string")
    if conn_string:
        for part in str(conn_string).split(";"):
            name, sep, value = part.partition("=")
            if sep:
                parsed[name.strip().lower()] = value.strip()
    if conn_type == "adls":
        if _extra(extra, "tenant_id") or _extra(extra, "client_secret_auth_config"):
            raise StatekeeperConfigError(
                "adls connection uses a service principal (tenant_id): Azure AD sign-in needs azure-identity, "
                "which Statekeeper does not ship; give the account key (extra account_key) or a SAS token")
        account = host or _extra(extra, "account_name") or parsed.get("accountname")
        key = _extra(extra, "account_key", "shared_access_key") or parsed.get("accountkey")
    else:
        host_account = None
        if host and "://" in host:   # the wasb connection's Account URL field
            host_account = (urlparse(host).hostname or "").split(".", 1)[0] or None
        account = login or _extra(extra, "account_name") or parsed.get("accountname") or host_account
        key = _extra(extra, "shared_access_key", "account_key") or password or parsed.get("accountkey")
    sas = _extra(extra, "sas_token") or parsed.get("sharedaccesssignature")
    endpoint = _extra(extra, "endpoint", "blob_endpoint") or parsed.get("blobendpoint")
    if key and sas:
        raise StatekeeperConfigError(f"{conn_type} connection has both an account key and a SAS token; keep one")
    if not (key or sas):
        raise StatekeeperConfigError(
            f"{conn_type} connection has neither an account key nor a SAS token; Statekeeper authorizes Azure "
            "storage with one of them (Azure AD sign-in needs azure-identity, which it does not ship)")
    if account:
        env[env_names.AZURE_ACCOUNT_NAME] = str(account)
    if key:
        env[env_names.AZURE_ACCOUNT_KEY] = str(key)
    if sas:
        env[env_names.AZURE_SAS_TOKEN] = str(sas)
    if endpoint:
        env[env_names.AZURE_BLOB_ENDPOINT] = str(endpoint)
    return env


def _s3_env(login: str | None, password: str | None, extra: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    if login:
        env[env_names.AWS_ACCESS_KEY_ID] = login
    if password:
        env[env_names.AWS_SECRET_ACCESS_KEY] = password
    if extra.get("aws_session_token"):
        env[env_names.AWS_SESSION_TOKEN] = str(extra["aws_session_token"])
    region = extra.get("region_name") or extra.get("region")
    if region:
        env[env_names.AWS_REGION] = env[env_names.AWS_DEFAULT_REGION] = str(region)
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}) or {}).get("endpoint_url")
    if endpoint:
        env[env_names.S3_ENDPOINT] = str(endpoint)
    style = extra.get("addressing_style") or (extra.get("s3_config", {}) or {}).get("addressing_style")
    if style:
        if style not in ("path", "virtual"):
            raise StatekeeperConfigError(f"addressing_style must be 'path' or 'virtual', got {style!r}")
        env[env_names.S3_PATH_STYLE] = "true" if style == "path" else "false"
    return env


def connection_env(conn_id: str, *, prefix: str = "") -> dict[str, str]:
    """The storage variables of connection `conn_id` ({} for ''), names prefixed by `prefix`; its
    secrets are masked in the task log from here on."""
    if not conn_id:
        return {}
    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson if conn.extra else {}
    env = storage_env_from_connection(conn.conn_type, conn.login, conn.password, extra, prefix=prefix,
                                      host=conn.host)
    for key in secret_env_names(prefix):
        if key in env:
            mask_secret(env[key])
    return env


def secret_env_names(prefix: str = "") -> list[str]:
    """SECRET_ENV as a store with variable prefix `prefix` spells them."""
    return [env_names.prefixed_env_name(key, prefix) for key in SECRET_ENV]
