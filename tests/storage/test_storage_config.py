"""StorageConfig: construction from env and mappings, validation, secret masking."""
from __future__ import annotations

import pickle

import pytest

from statekeeper.storage import StorageConfig, StorageConfigError


def test_from_env_reads_statekeeper_and_aws_variables():
    cfg = StorageConfig.from_env({
        "STATEKEEPER_S3_ENDPOINT": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI",
        "AWS_SESSION_TOKEN": "tok",
        "AWS_REGION": "eu-west-1",
        "STATEKEEPER_S3_READ_AHEAD_BYTES": "1048576",
        "STATEKEEPER_S3_DELETE_BATCH_SIZE": "250",
    })
    assert cfg.endpoint == "http://127.0.0.1:9000"
    assert cfg.region == "eu-west-1"
    assert cfg.access_key_id == "AKIDEXAMPLE"
    assert cfg.secret_access_key == "wJalrXUtnFEMI"
    assert cfg.session_token == "tok"
    assert cfg.read_ahead_bytes == 1048576
    assert cfg.delete_batch_size == 250
    assert cfg.use_path_style is True  # endpoint given → path style by default
    assert cfg.allow_http is True


def test_from_env_empty_means_aws_defaults():
    cfg = StorageConfig.from_env({})
    assert cfg.endpoint is None and cfg.access_key_id is None
    assert cfg.use_path_style is False and cfg.allow_http is False
    assert cfg.region == "us-east-1"


def test_env_precedence_statekeeper_over_aws_endpoint():
    cfg = StorageConfig.from_env({"AWS_ENDPOINT_URL": "http://a:1", "STATEKEEPER_S3_ENDPOINT": "http://b:2"})
    assert cfg.endpoint == "http://b:2"


def test_from_mapping_accepts_connection_style_aliases():
    cfg = StorageConfig.from_mapping({
        "endpoint_url": "https://s3.example.com", "aws_access_key_id": "k", "aws_secret_access_key": "s",
        "region_name": "ap-south-1", "addressing_style": "virtual",
    })
    assert cfg.endpoint == "https://s3.example.com"
    assert cfg.region == "ap-south-1"
    assert cfg.use_path_style is False
    assert cfg.allow_http is False
    assert StorageConfig.from_mapping(cfg.to_mapping(include_secrets=True)) == cfg


@pytest.mark.parametrize("mapping, message", [
    ({"endpoit": "http://x:1"}, "unknown storage option 'endpoit'"),
    ({"endpoint": "127.0.0.1:9000"}, "http(s) URL"),
    ({"access_key_id": "only-the-id"}, "both an access key id and a secret"),
    ({"delete_batch_size": 5000}, "delete_batch_size"),
    ({"read_ahead_bytes": "lots"}, "expected an integer"),
    ({"path_style": "maybe"}, "expected a boolean"),
    ({"endpoint": "http://a:1", "endpoint_url": "http://b:2"}, "given twice"),
])
def test_invalid_configuration_is_rejected_with_a_specific_message(mapping, message):
    with pytest.raises(StorageConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StorageConfig.from_mapping(mapping)


def test_secrets_never_appear_in_repr_str_or_masked_mapping():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id="AKID", secret_access_key="SUPERSECRET",
                        session_token="TOKENVALUE")
    for text in (repr(cfg), str(cfg), f"{cfg}", repr([cfg]), str(cfg.to_mapping(include_secrets=False))):
        assert "SUPERSECRET" not in text
        assert "TOKENVALUE" not in text
    assert "***" in repr(cfg)
    assert cfg.to_mapping(include_secrets=True)["secret_access_key"] == "SUPERSECRET"


def test_config_pickles_for_spark_tasks():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id="a", secret_access_key="b")
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_deltalake_options_keep_conditional_puts():
    opts = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id="a", secret_access_key="b").deltalake_storage_options()
    assert opts["AWS_ENDPOINT_URL"] == "http://127.0.0.1:1"
    assert opts["AWS_ALLOW_HTTP"] == "true"
    assert opts["AWS_ACCESS_KEY_ID"] == "a" and opts["AWS_SECRET_ACCESS_KEY"] == "b"
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in opts


def test_from_env_with_the_dr_prefix_reads_the_documented_names():
    """The DR store's variables: STATEKEEPER_DR_ in front of the usual names, one STATEKEEPER_ only."""
    from statekeeper.storage.config import DR_PREFIX, prefixed_env_name

    assert prefixed_env_name("STATEKEEPER_S3_ENDPOINT", DR_PREFIX) == "STATEKEEPER_DR_S3_ENDPOINT"
    assert prefixed_env_name("AWS_ACCESS_KEY_ID", DR_PREFIX) == "STATEKEEPER_DR_AWS_ACCESS_KEY_ID"
    assert prefixed_env_name("STATEKEEPER_S3_ENDPOINT", "") == "STATEKEEPER_S3_ENDPOINT"
    env = {
        "STATEKEEPER_DR_S3_ENDPOINT": "http://127.0.0.1:9100",
        "STATEKEEPER_DR_S3_PATH_STYLE": "false",
        "STATEKEEPER_DR_AWS_REGION": "eu-west-1",
        "STATEKEEPER_DR_AWS_ACCESS_KEY_ID": "dr-key",
        "STATEKEEPER_DR_AWS_SECRET_ACCESS_KEY": "dr-secret",
        "STATEKEEPER_DR_AWS_SESSION_TOKEN": "dr-token",
        # the source store's: not the target's
        "STATEKEEPER_S3_ENDPOINT": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "src-key",
        "AWS_SECRET_ACCESS_KEY": "src-secret",
    }
    assert StorageConfig.target_from_env(env) == StorageConfig(
        endpoint="http://127.0.0.1:9100", region="eu-west-1", access_key_id="dr-key", secret_access_key="dr-secret",
        session_token="dr-token", path_style=False)
    assert StorageConfig.from_env(env).endpoint == "http://127.0.0.1:9000"
    assert StorageConfig.target_from_env({"STATEKEEPER_DR_AWS_DEFAULT_REGION": "ap-south-1"}).region == "ap-south-1"
    assert StorageConfig.target_from_env({k: v for k, v in env.items() if not k.startswith(DR_PREFIX)}) is None
