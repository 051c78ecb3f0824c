"""DeleteObjects bodies built by statekeeper.storage.s3_delete_body, sent through botocore to the session's S3 server:
the same bytes botocore's own serializer sends, and no key reported deleted by a client that cannot send them."""
from __future__ import annotations

import base64
import zlib

import boto3
import pytest

from statekeeper.storage import StorageError
from statekeeper.storage.s3 import S3FileIO, make_s3_client
from statekeeper.storage.s3_delete_body import PLACEHOLDER, PrebuiltBodyNotSent, delete_objects_body, sending
from tests.plugins.s3 import make_bucket

pytestmark = pytest.mark.s3

# Keys that need escaping in XML, or that botocore's own handler rewrites (`\r`; moto cannot store a `\n`), or
# that are not ASCII.
AWKWARD_KEYS = ["d/plain", "d/a&b", "d/<tag>", "d/quote\"'apos", "d/carriage\rreturn",
                "d/tab\there", "d/space and %20", "d/unicode-\u00e9\u4e2d\U0001f600", "d/&amp;already"]


def _capture(client) -> list[tuple[bytes, dict[str, str]]]:
    """Every DeleteObjects request `client` sends: (body, headers), as they go on the wire."""
    sent: list[tuple[bytes, dict[str, str]]] = []

    def record(request, **_):
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        sent.append((bytes(request.body), headers))

    client.meta.events.register("before-send.s3.DeleteObjects", record)
    return sent


def _put(client, bucket: str, keys: list[str]) -> dict[str, str]:
    return {k: client.put_object(Bucket=bucket, Key=k, Body=b"x")["ETag"] for k in keys}


def _left(client, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", []))


@pytest.mark.parametrize("pinned", [True, False], ids=["with-etags", "plain"])
def test_the_body_is_the_one_botocore_sends_and_deletes_every_key(s3_config, pinned):
    fio = S3FileIO(s3_config)
    ours_sent = _capture(fio.client)
    native = make_s3_client(s3_config)
    native_sent = _capture(native)
    ours_bucket, native_bucket = make_bucket(s3_config, "body-ours"), make_bucket(s3_config, "body-native")
    ours_etags, native_etags = _put(native, ours_bucket, AWKWARD_KEYS), _put(native, native_bucket, AWKWARD_KEYS)
    assert ours_etags == native_etags   # same content, same ETags: the two documents must be byte for byte equal

    if pinned:
        answers = fio.delete_if_unchanged([(f"s3://{ours_bucket}/{k}", ours_etags[k]) for k in AWKWARD_KEYS])
        objects = [{"Key": k, "ETag": native_etags[k]} for k in AWKWARD_KEYS]
    else:
        answers = fio.delete_batch([f"s3://{ours_bucket}/{k}" for k in AWKWARD_KEYS])
        objects = [{"Key": k} for k in AWKWARD_KEYS]
    native.delete_objects(Bucket=native_bucket, Delete={"Objects": objects, "Quiet": True})

    assert [a.outcome.value for a in answers] == ["deleted"] * len(AWKWARD_KEYS)
    assert _left(native, ours_bucket) == [] and _left(native, native_bucket) == []
    (ours_body, ours_headers), = ours_sent
    (native_body, native_headers), = native_sent
    assert ours_body == native_body
    # The checksum botocore adds after our hook is over the body that went out.
    checksum = base64.b64encode(zlib.crc32(ours_body).to_bytes(4, "big")).decode()
    assert ours_headers["x-amz-checksum-crc32"] == checksum == native_headers["x-amz-checksum-crc32"]
    assert ours_headers["content-length"] == str(len(ours_body))


def test_the_builder_escapes_as_elementtree_does():
    body = delete_objects_body(["a&<>\"'b"], ['"e&1"']).decode()
    assert "<Key>a&amp;&lt;&gt;\"'b</Key><ETag>\"e&amp;1\"</ETag>" in body
    with pytest.raises(ValueError, match="2 ETags for 1 keys"):
        delete_objects_body(["k"], ['"a"', '"b"'])


def test_a_client_that_cannot_send_the_body_deletes_nothing_and_reports_no_key_deleted(s3_config, s3_bucket):
    fio = S3FileIO(s3_config)
    keys = [f"d/{i}" for i in range(5)]
    etags = _put(fio.client, s3_bucket, keys)
    # A client made without statekeeper's hook: the request that goes out carries the empty placeholder (which
    # this endpoint, like S3, refuses as malformed; one that accepted it would delete nothing, and `sending`
    # raises, as the last check shows).
    plain = boto3.client("s3", endpoint_url=s3_config.endpoint, region_name=s3_config.region,
                         aws_access_key_id=s3_config.access_key_id, aws_secret_access_key=s3_config.secret_access_key)
    fio._client = plain
    with pytest.raises(StorageError, match="DeleteObjects of 5 key"):
        fio.delete_if_unchanged([(f"s3://{s3_bucket}/{k}", etags[k]) for k in keys])
    with pytest.raises(StorageError, match="DeleteObjects of 5 key"):
        fio.delete_batch([f"s3://{s3_bucket}/{k}" for k in keys])
    report = fio.delete_many([f"s3://{s3_bucket}/{k}" for k in keys])
    assert report.deleted == [] and len(report.failed) == len(keys)
    assert _left(plain, s3_bucket) == keys
    # A request that succeeds without taking the body is an error, and the slot is empty afterwards.
    with pytest.raises(PrebuiltBodyNotSent, match="deleted nothing"):
        with sending(delete_objects_body(keys)):
            plain.list_objects_v2(Bucket=s3_bucket)
    with sending(delete_objects_body(keys[:1], [etags[keys[0]]])):
        make_s3_client(s3_config).delete_objects(Bucket=s3_bucket, Delete=PLACEHOLDER)
    assert _left(plain, s3_bucket) == keys[1:]
