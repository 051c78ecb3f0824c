"""Storage connection settings, built from environment variables or from a mapping.

One config carries the settings of every object store a process may reach: S3 (`s3://`), OSS (`oss://`,
through its S3-compatible API), Google Cloud Storage (`gs://`) and Azure Blob storage (`abfs[s]://`,
`wasb[s]://`). Each store reads only its own fields; fields of a store that is not used are ignored.

The same `StorageConfig` travels from the driver to Spark tasks and into deltalake's storage
options, so it is a plain frozen dataclass that pickles and never shows secrets in its repr.
`to_mapping()` masks secrets too (mappings end up in logs, XCom and JSON); only the callers that must
ship credentials (the Spark data source's `storage_secret` option) ask for `include_secrets=True`.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlparse

from statekeeper import storage_env
from statekeeper.storage.errors import StorageConfigError
from statekeeper.storage_env import DR_PREFIX, prefixed_env_name

_MASK = "***"

# Mapping keys accepted by `from_mapping`, with the aliases an Airflow AWS connection or boto3
# user would naturally write. Unknown keys are rejected so a typo never silently means "default".
_ALIASES: dict[str, str] = {
    "endpoint": "endpoint",
    "endpoint_url": "endpoint",
    "s3_endpoint": "endpoint",
    "host": "endpoint",
    "region": "region",
    "region_name": "region",
    "access_key_id": "access_key_id",
    "aws_access_key_id": "access_key_id",
    "login": "access_key_id",
    "secret_access_key": "secret_access_key",
    "aws_secret_access_key": "secret_access_key",
    "password": "secret_access_key",
    "session_token": "session_token",
    "aws_session_token": "session_token",
    "path_style": "path_style",
    "addressing_style": "path_style",
    "read_ahead_bytes": "read_ahead_bytes",
    "max_attempts": "max_attempts",
    "max_pool_connections": "max_pool_connections",
    "delete_batch_size": "delete_batch_size",
    "list_page_size": "list_page_size",
    "delete_recheck": "delete_recheck",
    # Google Cloud Storage
    "gcs_endpoint": "gcs_endpoint",
    "gcs_project": "gcs_project",
    "project": "gcs_project",
    "gcs_anonymous": "gcs_anonymous",
    "gcs_credentials_file": "gcs_credentials_file",
    "key_path": "gcs_credentials_file",
    "gcs_credentials_json": "gcs_credentials_json",
    "keyfile_dict": "gcs_credentials_json",
    # Azure Blob storage (abfs/wasb)
    "azure_account_name": "azure_account_name",
    "azure_account_key": "azure_account_key",
    "azure_sas_token": "azure_sas_token",
    "azure_blob_endpoint": "azure_blob_endpoint",
    # Alibaba OSS through its S3-compatible endpoint (Hadoop's fs.oss.* settings)
    "oss_endpoint": "oss_endpoint",
    "fs.oss.endpoint": "oss_endpoint",
    "oss_region": "oss_region",
    "oss_access_key_id": "oss_access_key_id",
    "fs.oss.accesskeyid": "oss_access_key_id",
    "oss_access_key_secret": "oss_access_key_secret",
    "fs.oss.accesskeysecret": "oss_access_key_secret",
    "oss_path_style": "oss_path_style",
    "oss_delete_recheck": "oss_delete_recheck",
}

_SECRET_FIELDS = storage_env.SECRET_FIELDS


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "path"):
        return True
    if text in ("0", "false", "no", "off", "virtual", "auto"):
        return False
    raise StorageConfigError(f"{name}: expected a boolean (true/false), got {value!r}")


def _parse_int(name: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise StorageConfigError(f"{name}: expected an integer, got {value!r}") from None
    if number < minimum or (maximum is not None and number > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise StorageConfigError(f"{name}: must be {bounds}, got {number}")
    return number


@dataclass(frozen=True)
class StorageConfig:
    """Connection settings for the object stores (local files need none).

    S3: `endpoint` is a full URL (`http://127.0.0.1:9000`) for S3-compatible stores; None means AWS.
    `path_style` defaults to True whenever an endpoint is given (MinIO, moto, Ceph need it).

    OSS (`oss://`): reached through its S3-compatible API at `oss_endpoint` (Hadoop's `fs.oss.endpoint`,
    e.g. `https://oss-cn-hangzhou.aliyuncs.com`), virtual-hosted style unless `oss_path_style`, with its
    own keys; the S3 retry, pool and batch settings apply.

    GCS (`gs://`): `gcs_endpoint` (an emulator's URL; None means Google), credentials from
    `gcs_credentials_json` (a service-account key's JSON), `gcs_credentials_file` (its path, like
    GOOGLE_APPLICATION_CREDENTIALS), else Application Default Credentials; `gcs_anonymous` sends none
    (emulators, public buckets). An endpoint without credentials is anonymous.

    Azure (`abfs[s]://`, `wasb[s]://`): the account comes from the URI; `azure_account_key` or
    `azure_sas_token` authorizes `azure_account_name` (when set, URIs naming another account are refused
    rather than sent with the wrong key). `azure_blob_endpoint` replaces `https://<account>.blob.<suffix>`
    (Azurite: `http://127.0.0.1:10000/devstoreaccount1`).
    """

    endpoint: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    path_style: bool | None = None
    read_ahead_bytes: int = 4 * 1024 * 1024
    max_attempts: int = 5
    max_pool_connections: int = 16
    delete_batch_size: int = 1000
    list_page_size: int = 1000
    gcs_endpoint: str | None = None
    gcs_project: str | None = None
    gcs_anonymous: bool | None = None
    gcs_credentials_file: str | None = None
    gcs_credentials_json: str | None = None
    azure_account_name: str | None = None
    azure_account_key: str | None = None
    azure_sas_token: str | None = None
    azure_blob_endpoint: str | None = None
    oss_endpoint: str | None = None
    oss_region: str | None = None
    oss_access_key_id: str | None = None
    oss_access_key_secret: str | None = None
    oss_path_style: bool | None = None
    # How GC makes sure an object is still the planned version when it deletes it (storage.model.DeleteRecheck):
    # "precondition" (the delete is conditional on it, where the store's self-test proves that it refuses a delete
    # pinned to another version: statekeeper.storage.enforcement; else the listing re-check) or "listing" (never
    # rely on the store: list again just before deleting, nothing is tested). OSS documents no conditional
    # DeleteObjects, so it keeps the listing re-check unless told otherwise.
    delete_recheck: str = "precondition"
    oss_delete_recheck: str = "listing"

    def __post_init__(self) -> None:
        for name, example in (("endpoint", "http://127.0.0.1:9000"), ("gcs_endpoint", "http://127.0.0.1:9023"),
                              ("azure_blob_endpoint", "http://127.0.0.1:10000/devstoreaccount1"),
                              ("oss_endpoint", "https://oss-cn-hangzhou.aliyuncs.com")):
            value = getattr(self, name)
            if value is None:
                continue
            parsed = urlparse(value)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                store = {"endpoint": "S3 endpoint", "gcs_endpoint": "GCS endpoint",
                         "azure_blob_endpoint": "Azure blob endpoint", "oss_endpoint": "OSS endpoint"}[name]
                raise StorageConfigError(f"{store} must be an http(s) URL such as {example}, got {value!r}")
        if (self.oss_access_key_id is None) != (self.oss_access_key_secret is None):
            raise StorageConfigError("OSS credentials need both an access key id and an access key secret (or neither)")
        if self.gcs_credentials_file and self.gcs_credentials_json:
            raise StorageConfigError("GCS credentials given twice: a key file path and a key's JSON; keep one")
        if self.gcs_anonymous and (self.gcs_credentials_file or self.gcs_credentials_json):
            raise StorageConfigError("GCS: anonymous access and credentials are contradictory; keep one")
        if self.azure_account_key and self.azure_sas_token:
            raise StorageConfigError("Azure credentials given twice: an account key and a SAS token; keep one")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise StorageConfigError(
                "S3 credentials need both an access key id and a secret access key (or neither, "
                "to use boto3's default credential chain)"
            )
        _parse_int("read_ahead_bytes", self.read_ahead_bytes, minimum=64 * 1024)
        _parse_int("max_attempts", self.max_attempts, minimum=1)
        _parse_int("max_pool_connections", self.max_pool_connections, minimum=1)
        # S3 DeleteObjects takes at most 1,000 keys per request.
        _parse_int("delete_batch_size", self.delete_batch_size, minimum=1, maximum=1000)
        _parse_int("list_page_size", self.list_page_size, minimum=1, maximum=1000)
        from statekeeper.storage.model import DeleteRecheck

        for name in ("delete_recheck", "oss_delete_recheck"):
            value = getattr(self, name)
            if value not in {m.value for m in DeleteRecheck}:
                raise StorageConfigError(f"{name}: expected one of {', '.join(m.value for m in DeleteRecheck)}, got "
                                         f"{value!r} (listing: for S3-compatible stores that ignore the per-object "
                                         "ETag of DeleteObjects)")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, prefix: str = "") -> StorageConfig:
        """Read STATEKEEPER_S3_* and the standard AWS_* variables, STATEKEEPER_GCS_* (with Google's
        GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_CLOUD_PROJECT, STORAGE_EMULATOR_HOST), STATEKEEPER_AZURE_*
        (with the Azure CLI's AZURE_STORAGE_ACCOUNT/KEY/SAS_TOKEN) and STATEKEEPER_OSS_* (with
        OSS_ACCESS_KEY_ID/SECRET).

        With a `prefix` (e.g. DR_PREFIX) every name is read with it in front (STATEKEEPER_DR_S3_ENDPOINT,
        STATEKEEPER_DR_AWS_ACCESS_KEY_ID, ...; see `prefixed_env_name`): a second store with its own
        endpoint and credentials in the same process, such as the disaster-recovery region."""
        env = os.environ if environ is None else environ

        def first(names: tuple[str, ...]) -> str | None:
            for name in names:
                value = env.get(prefixed_env_name(name, prefix))
                if value:
                    return value
            return None

        values = {field: first(names) for field, names in storage_env.READ_ORDER.items()}
        return cls.from_mapping({k: v for k, v in values.items() if v is not None})

    @classmethod
    def target_from_env(cls, environ: Mapping[str, str] | None = None) -> StorageConfig | None:
        """The disaster-recovery store's settings (DR_PREFIX variables), or None when none is set:
        the targets are then reached with the source's settings."""
        env = os.environ if environ is None else environ
        if not any(k.startswith(DR_PREFIX) and v for k, v in env.items()):
            return None
        return cls.from_env(env, prefix=DR_PREFIX)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> StorageConfig:
        """Build from a flat mapping (an Airflow connection's fields/extra, a JSON option)."""
        values: dict[str, Any] = {}
        for key, value in mapping.items():
            canonical = _ALIASES.get(key.lower())
            if canonical is None:
                raise StorageConfigError(
                    f"unknown storage option {key!r}; known options: {', '.join(sorted(_ALIASES))}"
                )
            if value is None or value == "":
                continue
            if canonical in _SECRET_FIELDS and value == _MASK:
                raise StorageConfigError(
                    f"storage option {key!r} holds the mask {_MASK!r}, not a secret: the mapping came from "
                    "StorageConfig.to_mapping() without include_secrets=True"
                )
            if canonical in values and values[canonical] != value:
                raise StorageConfigError(f"storage option {canonical!r} given twice with different values")
            values[canonical] = value
        for name in ("path_style", "oss_path_style", "gcs_anonymous"):
            if name in values:
                values[name] = _parse_bool(name, values[name])
        for name, minimum in (("read_ahead_bytes", 1), ("max_attempts", 1), ("max_pool_connections", 1),
                              ("delete_batch_size", 1), ("list_page_size", 1)):
            if name in values:
                values[name] = _parse_int(name, values[name], minimum=minimum)
        for name in ("delete_recheck", "oss_delete_recheck"):
            if name in values:
                values[name] = str(values[name]).strip().lower()
        if isinstance(values.get("gcs_credentials_json"), Mapping):   # an Airflow keyfile_dict as a dict
            import json

            values["gcs_credentials_json"] = json.dumps(values["gcs_credentials_json"])
        for name in ("endpoint", "region", "access_key_id", "secret_access_key", "session_token", "gcs_endpoint",
                     "gcs_project", "gcs_credentials_file", "gcs_credentials_json", "azure_account_name",
                     "azure_account_key", "azure_sas_token", "azure_blob_endpoint", "oss_endpoint", "oss_region",
                     "oss_access_key_id", "oss_access_key_secret"):
            if name in values:
                values[name] = str(values[name])
        if "gcs_endpoint" in values and "://" not in values["gcs_endpoint"]:
            # STORAGE_EMULATOR_HOST is often host:port alone; Google's clients then use http.
            values["gcs_endpoint"] = "http://" + values["gcs_endpoint"]
        return cls(**values)

    def to_mapping(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """Inverse of `from_mapping` (None values dropped).

        Secrets are masked unless `include_secrets=True`; a masked mapping cannot be turned back into a
        config (`from_mapping` rejects the mask), so a round trip that needs the keys fails loudly.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name in _SECRET_FIELDS and not include_secrets:
                value = _MASK
            out[f.name] = value
        return out

    def with_overrides(self, **changes: Any) -> StorageConfig:
        return replace(self, **changes)

    # -- derived settings ---------------------------------------------------------------------

    @property
    def use_path_style(self) -> bool:
        return self.path_style if self.path_style is not None else self.endpoint is not None

    def oss_s3_config(self) -> StorageConfig:
        """The S3-API settings that reach OSS (`oss://`): its endpoint, region and keys in the S3 fields,
        virtual-hosted style unless oss_path_style (OSS serves virtual-hosted requests)."""
        if not self.oss_endpoint:
            raise StorageConfigError(
                "oss:// needs the OSS endpoint: set STATEKEEPER_OSS_ENDPOINT (Hadoop's fs.oss.endpoint), e.g. "
                "https://oss-cn-hangzhou.aliyuncs.com"
            )
        region = self.oss_region or _oss_region(self.oss_endpoint)
        return replace(StorageConfig(), endpoint=self.oss_endpoint, region=region,
                       access_key_id=self.oss_access_key_id, secret_access_key=self.oss_access_key_secret,
                       path_style=bool(self.oss_path_style), read_ahead_bytes=self.read_ahead_bytes,
                       max_attempts=self.max_attempts, max_pool_connections=self.max_pool_connections,
                       delete_batch_size=self.delete_batch_size, list_page_size=self.list_page_size,
                       delete_recheck=self.oss_delete_recheck)

    @property
    def allow_http(self) -> bool:
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")

    def deltalake_storage_options(self) -> dict[str, str]:
        """Options for deltalake's object store. Conditional puts stay on: never set
        AWS_S3_ALLOW_UNSAFE_RENAME (it lost commits under concurrency in our measurements)."""
        opts: dict[str, str] = {"AWS_REGION": self.region}
        if self.endpoint:
            opts["AWS_ENDPOINT_URL"] = self.endpoint
        if self.allow_http:
            opts["AWS_ALLOW_HTTP"] = "true"
        if self.access_key_id:
            opts["AWS_ACCESS_KEY_ID"] = self.access_key_id
            opts["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key or ""
        if self.session_token:
            opts["AWS_SESSION_TOKEN"] = self.session_token
        opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if self.use_path_style else "true"
        return opts

    def __repr__(self) -> str:
        # Secrets are masked by to_mapping; unset (None) fields are left out.
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_mapping(include_secrets=False).items())
        return f"StorageConfig({shown})"

    __str__ = __repr__


def _oss_region(endpoint: str) -> str:
    """`cn-hangzhou` from `https://oss-cn-hangzhou.aliyuncs.com` (OSS's S3-compatible endpoints name their
    region); us-east-1 for anything else (an S3-compatible test endpoint ignores it)."""
    host = urlparse(endpoint).hostname or ""
    first = host.split(".", 1)[0]
    if first.startswith("oss-") and host.endswith(".aliyuncs.com"):
        return first[len("oss-"):].removesuffix("-internal")
    return "us-east-1"
