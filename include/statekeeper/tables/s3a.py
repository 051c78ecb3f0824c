"""How a Spark job reaches an `s3://` warehouse through Hadoop's S3A connector (`s3a://`).

A warehouse's StorageConfig (endpoint, region, keys, path style) becomes Hadoop's per-bucket settings
(`fs.s3a.bucket.<bucket>.*`), so two warehouses on two buckets with different endpoints or keys coexist in one
session. They are set at run time on the session's own Hadoop configuration (`spark._jsc.hadoopConfiguration()`),
never in the builder's conf: what the builder holds reaches spark-submit's argv, the SparkConf every task and the
UI see, and the event log, and a secret must be in none of them. The JVM's Hadoop conf is where S3A reads them
when it first opens the bucket.

Only local and `s3://` warehouses are reachable by the Spark jobs' JVM parts (hadoop-aws, no GCS, Azure or OSS
connector): any other scheme is refused before a job does any work (UnreachableWarehouseError).
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any
from urllib.parse import urlparse

from statekeeper.storage import StorageConfig
from statekeeper.tables.errors import TableError

SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"

# Where a session remembers which buckets it configured, and with what (a digest, never the values).
_CONFIGURED_ATTR = "_statekeeper_s3a_buckets"
_LOCK = threading.Lock()


class UnreachableWarehouseError(TableError):
    """The warehouse is on a store the Spark jobs' JVM parts have no connector for (gs://, abfs://, wasb://,
    oss://): only local and s3:// warehouses work with the Spark jobs."""


class S3ABucketConflictError(TableError):
    """Two warehouses on one bucket with different connection settings in one Spark session: Hadoop keeps one
    S3A file system per bucket, opened with the first settings, so the second warehouse would silently use them."""


def bucket_settings(uri: str, storage: StorageConfig) -> dict[str, str]:
    """The Hadoop settings that reach the bucket of the `s3://` or `s3a://` location `uri` with `storage`'s
    endpoint, region, path style and credentials, all scoped to that bucket (`fs.s3a.bucket.<bucket>.*`).

    Without keys the credential provider is left alone: S3A's default chain (environment, profile, container or
    instance role) applies, as it does for boto3 elsewhere in Statekeeper."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
        raise UnreachableWarehouseError(f"not an s3:// location: {uri!r}")
    prefix = f"fs.s3a.bucket.{parsed.netloc}."
    out: dict[str, str] = {
        prefix + "endpoint.region": storage.region,
        prefix + "path.style.access": "true" if storage.use_path_style else "false",
    }
    if storage.endpoint:
        out[prefix + "endpoint"] = storage.endpoint
        # An http:// endpoint (a local S3-compatible server) is reached without TLS.
        out[prefix + "connection.ssl.enabled"] = "false" if storage.allow_http else "true"
    if storage.access_key_id:
        out[prefix + "access.key"] = storage.access_key_id
        out[prefix + "secret.key"] = storage.secret_access_key or ""
        if storage.session_token:
            out[prefix + "session.token"] = storage.session_token
            out[prefix + "aws.credentials.provider"] = TEMPORARY_PROVIDER
        else:
            out[prefix + "aws.credentials.provider"] = SIMPLE_PROVIDER
    return out


def check_reachable(warehouse: Any) -> None:
    """UnreachableWarehouseError unless `warehouse` is local or on s3://: raised before a job does any work."""
    scheme = urlparse(warehouse.uri).scheme
    if scheme not in ("file", "s3", "s3a"):
        raise UnreachableWarehouseError(
            f"warehouse {warehouse.uri} is on {scheme}://, which the Spark jobs cannot reach: only local and s3:// "
            "warehouses are supported by the Spark jobs (their JVM parts carry Hadoop's S3A connector and no "
            "other object-store connector); put the warehouse on a local path or an s3:// prefix")


def configure(spark: Any, warehouse: Any) -> None:
    """Make `spark` reach `warehouse`'s bucket with its StorageConfig: the per-bucket S3A settings set at run time
    in the session's Hadoop configuration, once per session and bucket (a second call with the same settings does
    nothing). Local warehouses need nothing; other schemes are refused (UnreachableWarehouseError)."""
    check_reachable(warehouse)
    if urlparse(warehouse.uri).scheme == "file":
        return
    settings = bucket_settings(warehouse.uri, warehouse.storage)
    bucket = urlparse(warehouse.uri).netloc
    digest = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()
    # The Hadoop configuration belongs to the SparkContext, which every session of the JVM shares.
    context = spark.sparkContext
    with _LOCK:
        done: dict[str, str] = getattr(context, _CONFIGURED_ATTR, None) or {}
        if done.get(bucket) == digest:
            return
        if bucket in done:
            raise S3ABucketConflictError(
                f"warehouse {warehouse.uri}: bucket {bucket} was already opened in this Spark session with other "
                f"connection settings (endpoint, region, path style or credentials) than {warehouse.storage!r}; "
                "Hadoop keeps one S3A file system per bucket, so use one StorageConfig per bucket in a session")
        conf = spark._jsc.hadoopConfiguration()
        for key, value in settings.items():
            conf.set(key, value)
        done[bucket] = digest
        setattr(context, _CONFIGURED_ATTR, done)
