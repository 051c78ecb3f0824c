"""Spelling and settings of the schemes beyond file:// and s3://: gs://, Azure (abfs/abfss/wasb/wasbs),
hdfs: (against fs.defaultFS) and oss:// (an S3-compatible store of its own). docs/storage-schemes.md has
the rules; statekeeper.uri implements them.
"""
from __future__ import annotations

import pytest

from statekeeper.storage import (
    RootConfigError,
    Roots,
    RoutingFileIO,
    StorageConfig,
    StorageConfigError,
    UnsupportedRootSchemeError,
    UnsupportedSchemeError,
)
from statekeeper.storage.config import DR_PREFIX
from statekeeper.uri import flink_path_uri, is_under, join_uri, normalize_uri, parent_uri, resolve_relative

ACCT = "abfss://cp@acct.dfs.core.windows.net"


# -- gs:// ----------------------------------------------------------------------------------------------

def test_gs_keys_are_verbatim_and_flink_paths_normalized():
    assert normalize_uri("gs://b/k/") == "gs://b/k" and normalize_uri("GS://b") == "gs://b"
    assert len({normalize_uri(u) for u in ("gs://b/k//x", "gs://b/k/./x", "gs://b/k/x")}) == 3
    assert flink_path_uri("gs://b/k//x") == flink_path_uri("gs://b/k/y/../x") == "gs://b/k/x"
    assert normalize_uri("gs://b/odd%41 name") == "gs://b/odd%41 name"
    assert join_uri("gs://b/cp", "job/chk-1") == "gs://b/cp/job/chk-1"
    assert resolve_relative("gs://b/cp/job/chk-1", "f1") == "gs://b/cp/job/chk-1/f1"


@pytest.mark.parametrize("bad", ["gs:/k", "gs:///k", "gs://", "gs:k"])
def test_gs_without_a_bucket_is_refused(bad):
    with pytest.raises(ValueError, match=r"GCS URI without a bucket.*gs://bucket/key"):
        normalize_uri(bad)


# -- Azure ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", [
    "abfss://cp@acct.dfs.core.windows.net/job/chk-1/_metadata",
    "abfs://cp@acct.dfs.core.windows.net/job/chk-1/_metadata",
    "wasbs://cp@acct.blob.core.windows.net/job/chk-1/_metadata",
    "wasb://cp@acct.blob.core.windows.net/job/chk-1/_metadata",
    "WASBS://cp@ACCT.Blob.Core.Windows.Net/job/chk-1/_metadata/",
])
def test_every_azure_spelling_maps_onto_abfss_with_the_dfs_host(spelling):
    assert normalize_uri(spelling) == f"{ACCT}/job/chk-1/_metadata"
    assert flink_path_uri(spelling) == f"{ACCT}/job/chk-1/_metadata"


def test_azure_container_and_path_stay_verbatim_and_other_clouds_keep_their_suffix():
    assert normalize_uri("wasbs://Cp@acct.blob.core.windows.net/A//b") == "abfss://Cp@acct.dfs.core.windows.net/A//b"
    assert normalize_uri("wasbs://cp@acct.blob.core.chinacloudapi.cn/x") == "abfss://cp@acct.dfs.core.chinacloudapi.cn/x"
    assert normalize_uri("wasbs://cp@acct.blob.core.windows.net") == ACCT
    assert normalize_uri("wasbs://cp@acct.blob.core.windows.net/") == ACCT


def test_azure_reference_spelled_wasbs_joins_a_listing_spelled_abfss():
    """Flink configured with wasbs:// writes wasbs paths into `_metadata`; the listing says abfss. The
    reference (flink_path_uri, also of a relative handle) and the listed object are one string."""
    listed = normalize_uri("abfss://cp@acct.dfs.core.windows.net/job/shared/sst-1")
    stored = "wasbs://cp@acct.blob.core.windows.net/job/chk-3/../shared//sst-1"
    assert flink_path_uri(stored) == listed
    assert resolve_relative("wasb://cp@acct.blob.core.windows.net/job/chk-3", "f1") == f"{ACCT}/job/chk-3/f1"
    assert is_under(stored.replace("/chk-3/..", ""), "abfs://cp@acct.dfs.core.windows.net/job")
    assert parent_uri("wasbs://cp@acct.blob.core.windows.net/job/x") == f"{ACCT}/job"


@pytest.mark.parametrize("bad, message", [
    ("abfss://acct.dfs.core.windows.net/p", "without a container"),
    ("wasbs://@acct.blob.core.windows.net/p", "without a container"),
    ("abfss://cp@/p", "without a storage account host"),
    ("abfss://cp@localhost:10000/p", "without a storage account host"),
    ("wasbs://cp@acct.file.core.windows.net/p", "without a storage account host"),
    ("abfss:/p", "without a container and account"),
])
def test_azure_uri_without_container_or_account_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        normalize_uri(bad)


# -- hdfs ------------------------------------------------------------------------------------------------

def test_hdfs_with_a_namenode_keeps_it_and_lowercases_the_host(monkeypatch):
    monkeypatch.delenv("STATEKEEPER_HDFS_DEFAULT_FS", raising=False)
    assert normalize_uri("hdfs://NN:8020/flink/cp/") == "hdfs://nn:8020/flink/cp"
    assert flink_path_uri("hdfs://nn:8020/flink//cp/./x") == "hdfs://nn:8020/flink/cp/x"
    # A port is part of the address: an HA nameservice has none, so nn and nn:8020 are not unified.
    assert normalize_uri("hdfs://nn/cp") != normalize_uri("hdfs://nn:8020/cp")


@pytest.mark.parametrize("default", ["hdfs://namenode:8020", "hdfs://namenode:8020/", "HDFS://NameNode:8020"])
def test_hdfs_paths_without_namenode_resolve_against_default_fs(monkeypatch, default):
    monkeypatch.setenv("STATEKEEPER_HDFS_DEFAULT_FS", default)
    for stored in ("hdfs:/flink/cp/job/chk-1/_metadata", "hdfs:///flink/cp/job/chk-1/_metadata",
                   "hdfs://namenode:8020/flink/cp/job/chk-1/_metadata"):
        assert flink_path_uri(stored) == "hdfs://namenode:8020/flink/cp/job/chk-1/_metadata"
        assert normalize_uri(stored) == "hdfs://namenode:8020/flink/cp/job/chk-1/_metadata"
    # Flink's Path.toString() of a default-namenode checkpoint, a relative handle and a root all join.
    assert resolve_relative("hdfs:/flink/cp/job/chk-1", "f1") == "hdfs://namenode:8020/flink/cp/job/chk-1/f1"
    assert is_under("hdfs:/flink/cp/job/shared/x", "hdfs://namenode:8020/flink/cp")
    assert join_uri("hdfs:///flink/cp", "job") == "hdfs://namenode:8020/flink/cp/job"


def test_hdfs_without_namenode_or_default_fs_is_refused(monkeypatch):
    monkeypatch.delenv("STATEKEEPER_HDFS_DEFAULT_FS", raising=False)
    with pytest.raises(ValueError, match="STATEKEEPER_HDFS_DEFAULT_FS"):
        normalize_uri("hdfs:/flink/cp")
    monkeypatch.setenv("STATEKEEPER_HDFS_DEFAULT_FS", "file:///tmp")
    with pytest.raises(ValueError, match="not an hdfs://authority URI"):
        flink_path_uri("hdfs:///flink/cp")
    monkeypatch.setenv("STATEKEEPER_HDFS_DEFAULT_FS", "hdfs://nn:8020/user/x")
    with pytest.raises(ValueError, match="not an hdfs://authority URI"):
        normalize_uri("hdfs:/cp")


def test_hdfs_roots_and_fileio_fail_closed_with_what_is_supported(monkeypatch):
    monkeypatch.setenv("STATEKEEPER_HDFS_DEFAULT_FS", "hdfs://nn:8020")
    with pytest.raises(UnsupportedRootSchemeError, match=r"hdfs://nn:8020/cp.*needs an HDFS client.*gs://"):
        Roots(["hdfs:/cp"])
    assert issubclass(UnsupportedRootSchemeError, RootConfigError)
    assert issubclass(UnsupportedRootSchemeError, UnsupportedSchemeError)
    with pytest.raises(UnsupportedSchemeError, match=r"needs an HDFS client.*abfss://"):
        RoutingFileIO().stat("hdfs:///cp/x")


# -- oss:// ----------------------------------------------------------------------------------------------

def test_oss_is_its_own_store_with_verbatim_keys():
    assert normalize_uri("oss://bkt/cp//x/") == "oss://bkt/cp//x"
    assert flink_path_uri("oss://bkt/cp//x") == "oss://bkt/cp/x"
    assert normalize_uri("oss://bkt/x") != normalize_uri("s3://bkt/x")  # a bucket on OSS is not one on AWS
    with pytest.raises(ValueError, match="OSS URI without a bucket"):
        normalize_uri("oss:///x")


def test_oss_settings_become_virtual_hosted_s3_api_settings():
    config = StorageConfig.from_env({"STATEKEEPER_OSS_ENDPOINT": "https://oss-cn-hangzhou.aliyuncs.com",
                                     "OSS_ACCESS_KEY_ID": "LTAIid", "OSS_ACCESS_KEY_SECRET": "oss-secret"})
    s3 = config.oss_s3_config()
    assert (s3.endpoint, s3.region, s3.access_key_id, s3.secret_access_key) == (
        "https://oss-cn-hangzhou.aliyuncs.com", "cn-hangzhou", "LTAIid", "oss-secret")
    assert s3.use_path_style is False   # OSS serves bucket.oss-<region>.aliyuncs.com
    assert "oss-secret" not in repr(config) and "oss-secret" not in repr(s3)
    assert StorageConfig.from_mapping({"fs.oss.endpoint": "https://oss-eu-central-1-internal.aliyuncs.com"}
                                      ).oss_s3_config().region == "eu-central-1"
    with pytest.raises(StorageConfigError, match="STATEKEEPER_OSS_ENDPOINT"):
        StorageConfig().oss_s3_config()
    with pytest.raises(StorageConfigError, match="access key id and an access key secret"):
        StorageConfig(oss_access_key_id="only-id")


@pytest.mark.s3
def test_oss_uris_round_trip_through_the_s3_api(s3_config):
    """The session's S3 server (SeaweedFS) stands in for OSS's S3-compatible endpoint (path style here:
    virtual-hosted names such as bucket.localhost do not resolve on this machine)."""
    from tests.plugins.s3 import make_bucket

    config = StorageConfig(oss_endpoint=s3_config.endpoint, oss_access_key_id=s3_config.access_key_id,
                           oss_access_key_secret=s3_config.secret_access_key, oss_path_style=True)
    bucket = make_bucket(config.oss_s3_config())
    fio = RoutingFileIO(config)
    written = fio.write(f"oss://{bucket}/cp/job/chk-1/_metadata", b"meta")
    assert written.uri == f"oss://{bucket}/cp/job/chk-1/_metadata"
    assert [i.uri for i in fio.list(f"oss://{bucket}/cp")] == [written.uri]
    assert list(fio.list_dirs(f"oss://{bucket}/cp")) == [f"oss://{bucket}/cp/job"]
    assert fio.read_bytes(written.uri) == b"meta" and fio.stat(written.uri).etag == written.etag
    assert fio.delete_many([written.uri]).deleted == [written.uri]
    # The same bucket name through s3:// is another store (here: the default, unconfigured one).
    assert fio.backend(f"s3://{bucket}/x") is not fio.backend(f"oss://{bucket}/x")


# -- roots and settings ----------------------------------------------------------------------------------

def test_roots_accept_every_listable_scheme_in_canonical_spelling():
    roots = Roots(["gs://b/cp", "wasbs://cp@acct.blob.core.windows.net/flink", "oss://b/sp", "s3a://b/cp"])
    assert roots.uris == ["gs://b/cp", f"{ACCT}/flink", "oss://b/sp", "s3://b/cp"]
    assert roots.require("abfs://cp@acct.dfs.core.windows.net/flink/job/x").uri == f"{ACCT}/flink"
    with pytest.raises(RootConfigError, match="top level"):
        Roots(["wasbs://cp@acct.blob.core.windows.net"])
    with pytest.raises(RootConfigError, match="overlap"):
        Roots(["wasbs://cp@acct.blob.core.windows.net/a", "abfss://cp@acct.dfs.core.windows.net/a/b"])


def test_gcs_and_azure_settings_from_the_environment_and_the_dr_prefix():
    env = {
        "STATEKEEPER_GCS_ENDPOINT": "http://127.0.0.1:9023", "STATEKEEPER_GCS_PROJECT": "p1",
        "GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json",
        "STATEKEEPER_AZURE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_KEY": "az-secret",
        "STATEKEEPER_AZURE_BLOB_ENDPOINT": "http://127.0.0.1:10000/acct",
        "STATEKEEPER_DR_GCS_CREDENTIALS_JSON": '{"type": "service_account"}',
        "STATEKEEPER_DR_AZURE_SAS_TOKEN": "sv=2024&sig=dr-secret", "STATEKEEPER_DR_AZURE_ACCOUNT_NAME": "dracct",
    }
    source = StorageConfig.from_env(env)
    assert (source.gcs_endpoint, source.gcs_project, source.gcs_credentials_file) == (
        "http://127.0.0.1:9023", "p1", "/keys/sa.json")
    assert (source.azure_account_name, source.azure_account_key, source.azure_blob_endpoint) == (
        "acct", "az-secret", "http://127.0.0.1:10000/acct")
    target = StorageConfig.target_from_env(env)
    assert target is not None
    assert (target.gcs_credentials_json, target.azure_sas_token, target.azure_account_name) == (
        '{"type": "service_account"}', "sv=2024&sig=dr-secret", "dracct")
    assert target.azure_account_key is None and target.gcs_endpoint is None
    for config, secret in ((source, "az-secret"), (target, "dr-secret"), (target, "service_account")):
        assert secret not in repr(config) and secret not in str(config.to_mapping())
    # The masked mapping cannot come back as credentials; the unmasked one round-trips.
    with pytest.raises(StorageConfigError, match="mask"):
        StorageConfig.from_mapping(target.to_mapping())
    assert StorageConfig.from_mapping(target.to_mapping(include_secrets=True)) == target


def test_storage_emulator_host_means_an_anonymous_emulator():
    config = StorageConfig.from_env({"STORAGE_EMULATOR_HOST": "127.0.0.1:9023"})
    assert config.gcs_endpoint == "http://127.0.0.1:9023"
    from statekeeper.storage.gcs import make_gcs_client

    client = make_gcs_client(config)   # no credentials are looked up
    assert type(client._credentials).__name__ == "AnonymousCredentials"


@pytest.mark.parametrize("values, message", [
    ({"gcs_endpoint": "127.0.0.1:9023"}, "GCS endpoint must be an http"),
    ({"azure_blob_endpoint": "ftp://x"}, "Azure blob endpoint must be an http"),
    ({"azure_account_key": "k", "azure_sas_token": "s"}, "keep one"),
    ({"gcs_credentials_file": "/k.json", "gcs_credentials_json": "{}"}, "keep one"),
    ({"gcs_anonymous": True, "gcs_credentials_file": "/k.json"}, "contradictory"),
])
def test_contradictory_or_malformed_store_settings_are_refused(values, message):
    with pytest.raises(StorageConfigError, match=message):
        StorageConfig(**values)


def test_missing_credentials_name_the_settings_to_set(tmp_path, monkeypatch):
    from statekeeper.storage.azure import AzureFileIO
    from statekeeper.storage.gcs import make_gcs_client

    with pytest.raises(StorageConfigError, match="STATEKEEPER_AZURE_ACCOUNT_KEY"):
        AzureFileIO(StorageConfig()).stat(f"{ACCT}/x")
    bad = tmp_path / "key.json"
    bad.write_text("{not json")
    with pytest.raises(StorageConfigError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        make_gcs_client(StorageConfig(gcs_credentials_file=str(bad)))
    # A credential configuration that would run a program or fetch a URL is not loaded.
    with pytest.raises(StorageConfigError, match="'external_account' are not supported"):
        make_gcs_client(StorageConfig(gcs_credentials_json='{"type": "external_account", "credential_source": '
                                                           '{"executable": {"command": "/bin/true"}}}'))


@pytest.mark.parametrize("uri, scheme", [
    ("file:///data/cp/f", "file"), ("/data/cp/f", "file"), ("file:/data/cp/f", "file"),
    ("s3://b/k", "s3"), ("s3a://b/k", "s3"), ("S3://b/k", "s3"), ("s3n://b/k", "s3"),
    ("gs://b/k", "gs"), ("oss://b/k", "oss"),
    ("abfss://c@a.dfs.core.windows.net/k", "abfss"), ("wasbs://c@a.blob.core.windows.net/k", "abfss"),
])
def test_scheme_of_is_the_canonical_spellings_scheme(uri, scheme):
    """scheme_of is the scheme of the canonical spelling: every alias maps as normalize_uri maps it."""
    from statekeeper.storage.router import scheme_of

    assert scheme_of(uri) == scheme == normalize_uri(uri).partition(":")[0]


@pytest.mark.parametrize("uri", ["file://remote-host/data/f", "file:///../f", "s3:///k", "gs:///k",
                                 "abfss://acct.dfs.core.windows.net/k"])
def test_scheme_of_refuses_what_normalize_uri_refuses(uri):
    from statekeeper.storage.router import scheme_of

    with pytest.raises(ValueError):
        scheme_of(uri)
