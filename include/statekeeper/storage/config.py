"""Storage connection settings, built from environment variables or from a mapping.

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

from statekeeper.storage.errors import StorageConfigError

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
}

_SECRET_FIELDS = frozenset({"secret_access_key", "session_token"})


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


# Variables of the second store (copy_to_dr's targets): the usual names with this in front.
DR_PREFIX = "STATEKEEPER_DR_"
_NAMESPACE = "STATEKEEPER_"


def prefixed_env_name(name: str, prefix: str) -> str:
    """`name` as a store with variable prefix `prefix` spells it: the prefix in front, and Statekeeper's
    own names keep one STATEKEEPER_ (STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT,
    AWS_REGION -> STATEKEEPER_DR_AWS_REGION)."""
    if prefix and prefix.startswith(_NAMESPACE) and name.startswith(_NAMESPACE):
        name = name[len(_NAMESPACE):]
    return prefix + name


@dataclass(frozen=True)
class StorageConfig:
    """Connection settings for `s3://` (local files need none).

    `endpoint` is a full URL (`http://127.0.0.1:9000`) for S3-compatible stores; None means AWS.
    `path_style` defaults to True whenever an endpoint is given (MinIO, moto, Ceph need it).
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

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            parsed = urlparse(self.endpoint)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise StorageConfigError(
                    f"S3 endpoint must be an http(s) URL such as http://127.0.0.1:9000, got {self.endpoint!r}"
                )
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

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, prefix: str = "") -> StorageConfig:
        """Read STATEKEEPER_S3_* and the standard AWS_* variables.

        With a `prefix` (e.g. DR_PREFIX) every name is read with it in front (STATEKEEPER_DR_S3_ENDPOINT,
        STATEKEEPER_DR_AWS_ACCESS_KEY_ID, ...; see `prefixed_env_name`): a second store with its own
        endpoint and credentials in the same process, such as the disaster-recovery region."""
        env = os.environ if environ is None else environ

        def first(*names: str) -> str | None:
            for name in names:
                value = env.get(prefixed_env_name(name, prefix))
                if value:
                    return value
            return None

        values: dict[str, Any] = {
            "endpoint": first("STATEKEEPER_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
            "region": first("STATEKEEPER_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
            "access_key_id": first("AWS_ACCESS_KEY_ID"),
            "secret_access_key": first("AWS_SECRET_ACCESS_KEY"),
            "session_token": first("AWS_SESSION_TOKEN"),
            "path_style": first("STATEKEEPER_S3_PATH_STYLE"),
            "read_ahead_bytes": first("STATEKEEPER_S3_READ_AHEAD_BYTES"),
            "max_attempts": first("STATEKEEPER_S3_MAX_ATTEMPTS"),
            "max_pool_connections": first("STATEKEEPER_S3_MAX_POOL_CONNECTIONS"),
            "delete_batch_size": first("STATEKEEPER_S3_DELETE_BATCH_SIZE"),
            "list_page_size": first("STATEKEEPER_S3_LIST_PAGE_SIZE"),
        }
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
        if "path_style" in values:
            values["path_style"] = _parse_bool("path_style", values["path_style"])
        for name, minimum in (("read_ahead_bytes", 1), ("max_attempts", 1), ("max_pool_connections", 1),
                              ("delete_batch_size", 1), ("list_page_size", 1)):
            if name in values:
                values[name] = _parse_int(name, values[name], minimum=minimum)
        for name in ("endpoint", "region", "access_key_id", "secret_access_key", "session_token"):
            if name in values:
                values[name] = str(values[name])
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
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_mapping(include_secrets=False).items())
        return f"StorageConfig({shown})"

    __str__ = __repr__
