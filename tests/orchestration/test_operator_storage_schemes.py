"""Airflow connections for gs:// and Azure storage become the environment variables StorageConfig reads,
for the source store and (prefixed) for the DR store; their secrets are masked in the task log and never
show in a config's repr or mapping.
"""
from __future__ import annotations

import json

import pytest

from statekeeper.storage import StorageConfig
from statekeeper.storage.config import DR_PREFIX
from tests.orchestration.support import plugin_module

GCS_KEY = {"type": "service_account", "project_id": "proj-1", "private_key": "-----BEGIN gcs-secret-key",
           "client_email": "sk@proj-1.iam.gserviceaccount.com"}
AZ_KEY = "azure/account+Key==ForConnTest"
AZ_SAS = "sv=2025-01-05&sig=azure-sas-ForConnTest"


@pytest.fixture(scope="module")
def connections():
    return plugin_module("connections")


def _secret_values(env: dict[str, str], connections, prefix: str = "") -> set[str]:
    return {v for k, v in env.items() if k in connections.secret_env_names(prefix)}


@pytest.mark.parametrize("prefix", ["", DR_PREFIX])
def test_google_cloud_platform_connection(connections, prefix):
    extra = {"keyfile_dict": GCS_KEY, "project": "proj-1", "endpoint": "http://127.0.0.1:9023"}
    env = connections.storage_env_from_connection("google_cloud_platform", None, None, extra, prefix=prefix)
    p = prefix or "STATEKEEPER_"
    assert env == {f"{p}GCS_CREDENTIALS_JSON": json.dumps(GCS_KEY), f"{p}GCS_PROJECT": "proj-1",
                   f"{p}GCS_ENDPOINT": "http://127.0.0.1:9023"}
    assert _secret_values(env, connections, prefix) == {json.dumps(GCS_KEY)}
    config = StorageConfig.target_from_env(env) if prefix else StorageConfig.from_env(env)
    assert config is not None and json.loads(config.gcs_credentials_json or "") == GCS_KEY
    assert (config.gcs_project, config.gcs_endpoint) == ("proj-1", "http://127.0.0.1:9023")
    assert "gcs-secret-key" not in repr(config) and "gcs-secret-key" not in json.dumps(config.to_mapping())


def test_google_cloud_platform_key_path_and_old_extra_names(connections):
    env = connections.storage_env_from_connection(
        "google_cloud_platform", None, None,
        {"extra__google_cloud_platform__key_path": "/keys/sa.json", "extra__google_cloud_platform__project": "p"})
    assert env == {"STATEKEEPER_GCS_CREDENTIALS_FILE": "/keys/sa.json", "STATEKEEPER_GCS_PROJECT": "p"}
    assert StorageConfig.from_env(env).gcs_credentials_file == "/keys/sa.json"
    with pytest.raises(connections.StatekeeperConfigError, match="keep one"):
        connections.storage_env_from_connection("google_cloud_platform", None, None,
                                              {"key_path": "/k.json", "keyfile_dict": GCS_KEY})
    with pytest.raises(connections.StatekeeperConfigError, match="Secret Manager"):
        connections.storage_env_from_connection("google_cloud_platform", None, None, {"key_secret_name": "k"})


@pytest.mark.parametrize("prefix", ["", DR_PREFIX])
def test_wasb_connection_with_account_key(connections, prefix):
    env = connections.storage_env_from_connection("wasb", "acct", AZ_KEY, {"endpoint": "http://127.0.0.1:10000/acct"},
                                                prefix=prefix)
    p = prefix or "STATEKEEPER_"
    assert env == {f"{p}AZURE_ACCOUNT_NAME": "acct", f"{p}AZURE_ACCOUNT_KEY": AZ_KEY,
                   f"{p}AZURE_BLOB_ENDPOINT": "http://127.0.0.1:10000/acct"}
    assert _secret_values(env, connections, prefix) == {AZ_KEY}
    config = StorageConfig.target_from_env(env) if prefix else StorageConfig.from_env(env)
    assert config is not None and (config.azure_account_name, config.azure_account_key) == ("acct", AZ_KEY)
    assert AZ_KEY not in repr(config)


def test_wasb_connection_string_and_sas(connections):
    conn_string = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + AZ_KEY +
                   ";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;")
    env = connections.storage_env_from_connection("wasb", None, None, {"connection_string": conn_string})
    assert env == {"STATEKEEPER_AZURE_ACCOUNT_NAME": "devstoreaccount1", "STATEKEEPER_AZURE_ACCOUNT_KEY": AZ_KEY,
                   "STATEKEEPER_AZURE_BLOB_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1"}
    env = connections.storage_env_from_connection("wasb", "acct", None, {"sas_token": AZ_SAS})
    assert env == {"STATEKEEPER_AZURE_ACCOUNT_NAME": "acct", "STATEKEEPER_AZURE_SAS_TOKEN": AZ_SAS}
    assert _secret_values(env, connections) == {AZ_SAS}
    with pytest.raises(connections.StatekeeperConfigError, match="keep one"):
        connections.storage_env_from_connection("wasb", "acct", AZ_KEY, {"sas_token": AZ_SAS})
    with pytest.raises(connections.StatekeeperConfigError, match="neither an account key nor a SAS token"):
        connections.storage_env_from_connection("wasb", "acct", None, {})


def test_adls_connection(connections):
    env = connections.storage_env_from_connection("adls", None, None, {"account_key": AZ_KEY}, host="acct")
    assert env == {"STATEKEEPER_AZURE_ACCOUNT_NAME": "acct", "STATEKEEPER_AZURE_ACCOUNT_KEY": AZ_KEY}
    with pytest.raises(connections.StatekeeperConfigError, match="service principal"):
        connections.storage_env_from_connection("adls", "client-id", "client-secret", {"tenant_id": "t"}, host="acct")


def test_unknown_connection_type_names_the_supported_ones(connections):
    with pytest.raises(connections.StatekeeperConfigError,
                       match=r"'aws'.*'google_cloud_platform'.*'wasb'.*'adls'.*storage_conn_id empty"):
        connections.storage_env_from_connection("postgres", "u", "p", {})


def test_every_secret_variable_is_masked_under_both_prefixes(connections):
    """secret_env_names(prefix) is what connection_env masks: the DR names must be spelled the way
    prefixed_env_name spells them (STATEKEEPER_DR_AZURE_ACCOUNT_KEY, not STATEKEEPER_DR_STATEKEEPER_...)."""
    from statekeeper.storage.config import prefixed_env_name

    for prefix in ("", DR_PREFIX):
        assert connections.secret_env_names(prefix) == [prefixed_env_name(n, prefix) for n in connections.SECRET_ENV]
    assert "STATEKEEPER_DR_AZURE_ACCOUNT_KEY" in connections.secret_env_names(DR_PREFIX)
    assert "STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY" in connections.secret_env_names(DR_PREFIX)


def test_connection_env_masks_the_secrets_it_maps(connections, monkeypatch):
    masked: list[str] = []
    monkeypatch.setattr(connections, "mask_secret", masked.append)
    monkeypatch.setenv("AIRFLOW_CONN_SK_AZ_DR", json.dumps({"conn_type": "wasb", "login": "acct",
                                                             "password": AZ_KEY}))
    monkeypatch.setenv("AIRFLOW_CONN_SK_GCS", json.dumps({"conn_type": "google_cloud_platform",
                                                           "extra": {"keyfile_dict": GCS_KEY}}))
    dr = connections.connection_env("sk_az_dr", prefix=DR_PREFIX)
    assert dr["STATEKEEPER_DR_AZURE_ACCOUNT_KEY"] == AZ_KEY and masked == [AZ_KEY]
    source = connections.connection_env("sk_gcs")
    assert masked == [AZ_KEY, source["STATEKEEPER_GCS_CREDENTIALS_JSON"]]
