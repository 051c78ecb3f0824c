"""The benchmarks' S3 endpoint: moto's S3 server with the preconditions it ignores enforced, and a seeding hook:
`python -m bench._moto_server -H HOST -p PORT` (the same arguments as `moto_server`), started by
bench/_moto.py's `EnforcingMotoServer` for bench/gc_delete.py and bench/dr_copy.py. The tests do not use it: their S3
endpoint is SeaweedFS (tests/plugins/seaweedfs.py), a real S3 server that enforces these preconditions itself.

Why the benchmarks keep it (a real server does not serve them): they measure our client, not the endpoint, and
need (1) 100,000 objects per measured way set up in seconds (`_seeding`, below: SeaweedFS took 130-700 PUTs/s on 2
busy cores, minutes per bucket, and objects copied in through its filer have no MD5 ETag), (2) the enforced path
(the self-tests say `enforced`, so GC deletes with each key's ETag and no listing first, and the DR copy pins its
server-side copies; on moto as released they say `ignored`, and the re-checks would be measured instead), (3) a
DeleteObjects that costs little (3,000 keys with their ETags, 4 threads, in one run on 2 busy cores: SeaweedFS ~480
keys/s, this launcher ~2,800: on SeaweedFS the server would be measured), and (4) an access log to count requests.

moto 5.2.5 honours `If-Match` on a single DeleteObject, GetObject and HeadObject and `If-None-Match: *` on
PutObject and CompleteMultipartUpload, but it accepts and then ignores three preconditions that Amazon S3
enforces and that Statekeeper relies on:

* the per-object `<ETag>` inside a DeleteObjects request (S3 since 2025-09: a key whose current ETag differs
  is kept and answered with a `PreconditionFailed` error entry; a missing key with `NoSuchKey`);
* `x-amz-copy-source-if-match` on CopyObject and UploadPartCopy (412 when the source's ETag differs);
* `If-None-Match: *` on CopyObject (412 when the destination exists).

This launcher wraps the three handlers before moto's server starts. ETags compare without their quotes, as moto's
own checks do.

Two more changes make DeleteObjects cost what it costs on S3, so that a benchmark against this endpoint
measures the client, not moto: a quiet request (`<Quiet>true</Quiet>`) is answered with its errors only, as S3
answers it (moto lists every deleted key), and `S3Response.backend`, which moto reads once per key and which takes
a process-wide lock to scan every service's backends, is looked up once per request. Answers are otherwise
unchanged.
"""
from __future__ import annotations

import re
import sys
from typing import Any
from urllib.parse import unquote, urlparse
from xml.etree import ElementTree

import xmltodict
from moto.core.responses import ActionResult
from moto.s3.exceptions import PreconditionFailed
from moto.s3.responses import S3Response

_MESSAGE = "At least one of the pre-conditions you specified did not hold"
_QUIET = re.compile(rb"<Quiet>\s*true\s*</Quiet>", re.IGNORECASE)
_ETAG = re.compile(rb"<ETag>[^<]*</ETag>")


def _bare(etag: str | None) -> str:
    return (etag or "").replace('"', "")


def _current_etag(response: S3Response, bucket: str, key: str) -> str | None:
    found = response.backend.get_object(bucket, key)
    return None if found is None else _bare(found.etag)


def _copy_source(response: S3Response) -> tuple[str, str]:
    source = response.headers.get("x-amz-copy-source")
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    bucket, key = unquote(urlparse(source).path).lstrip("/").split("/", 1)
    return bucket, key


def _checked_copy(handler: Any, *, target_condition: bool) -> Any:
    def wrapper(self: S3Response, *args: Any, **kwargs: Any) -> Any:
        want = self.headers.get("x-amz-copy-source-if-match")
        if want is not None:
            current = _current_etag(self, *_copy_source(self))
            if current is not None and current != _bare(want):   # a missing source: moto answers 404 itself
                raise PreconditionFailed("x-amz-copy-source-If-Match")
        if target_condition and self.headers.get("If-None-Match") == "*":
            if self.backend.get_object(self.bucket_name, self.parse_key_name()) is not None:
                raise PreconditionFailed("If-None-Match")
        return handler(self, *args, **kwargs)
    return wrapper


def _checked_delete_keys(handler: Any) -> Any:
    """DeleteObjects: each object that names an ETag is deleted only while it is that object's ETag; the
    others are answered as S3 answers them (per key, in the same 200 response). A quiet request is answered with
    its errors only, as S3 answers it (moto lists every deleted key)."""
    def wrapper(self: S3Response, bucket_name: str, authenticated: bool = True) -> Any:
        body_text = self.body if isinstance(self.body, (bytes, str)) else bytes(self.body)
        raw = body_text.encode("utf-8") if isinstance(body_text, str) else body_text
        quiet = _QUIET.search(raw) is not None
        if b"<ETag>" not in raw:
            return _answer(self, handler, bucket_name, authenticated, [], quiet)
        # ElementTree first (C, fast): a request whose every precondition holds goes to moto's handler without
        # its ETags (moto ignores them), so the check costs a parse and a lookup per key, not a second pass through
        # xmltodict.
        root = ElementTree.fromstring(raw)
        refusals: dict[str, tuple[str, str]] = {}
        for obj in root:
            if obj.tag.rpartition("}")[2] != "Object":
                continue
            key = etag = None
            for child in obj:
                name = child.tag.rpartition("}")[2]
                if name == "Key":
                    key = child.text or ""
                elif name == "ETag":
                    etag = child.text or ""
            if key is None or etag is None:
                continue
            current = _current_etag(self, bucket_name, key)
            if current is None:
                refusals[key] = ("NoSuchKey", "The specified key does not exist.")
            elif current != _bare(etag):
                refusals[key] = ("PreconditionFailed", _MESSAGE)
        if not refusals:
            self.body = _ETAG.sub(b"", raw)
            return _answer(self, handler, bucket_name, authenticated, [], quiet)
        body = xmltodict.parse(raw, strip_whitespace=False)
        objects = body["Delete"].get("Object", [])
        if not isinstance(objects, list):
            objects = [objects]
        refused = [{"Key": k, "Code": code, "Message": message} for k, (code, message) in refusals.items()]
        passing = [obj for obj in objects if not (isinstance(obj, dict) and obj.get("Key") in refusals)]
        if not passing:
            self.data["Action"] = "DeleteObjects"
            return self.serialized(ActionResult({"Deleted": [], "Errors": refused}))
        self.body = xmltodict.unparse({"Delete": {**body["Delete"], "Object": passing}})
        return _answer(self, handler, bucket_name, authenticated, refused, quiet)
    return wrapper


def _answer(response: S3Response, handler: Any, bucket_name: str, authenticated: bool, refused: list[dict[str, str]],
            quiet: bool) -> Any:
    """moto's DeleteObjects answer, with the refused keys' errors added and, in quiet mode, no `Deleted` list."""
    if not refused and not quiet:
        return handler(response, bucket_name, authenticated)
    serialized = response.serialized

    def amended(result: ActionResult) -> Any:
        merged = dict(result.result)  # type: ignore[call-overload]
        merged["Errors"] = [*merged.get("Errors", []), *refused]
        if quiet:
            merged["Deleted"] = []
        return serialized(ActionResult(merged))

    response.serialized = amended  # type: ignore[method-assign]
    try:
        return handler(response, bucket_name, authenticated)
    finally:
        del response.serialized


def _backend_once(fget: Any) -> property:
    """`S3Response.backend` computed once per request (one S3Response serves one request): moto's own
    DeleteObjects handler and the precondition check above read it per key, and each read takes a process-wide
    lock and scans every service."""
    def backend(self: S3Response) -> Any:
        found = self.__dict__.get("_statekeeper_backend")
        if found is None:
            found = self.__dict__["_statekeeper_backend"] = fget(self)
        return found
    return property(backend)


def _seeding(app: Any) -> Any:
    """Benchmarks only (STATEKEEPER_MOTO_SEED=1): `POST /_statekeeper/seed` with a JSON body {"bucket": name,
    "objects": [[key, size], ...]} creates the objects inside the server, with distinct contents, without a request
    each (moto takes ~5 ms of CPU per PUT: 100,000 objects would take minutes to set up). They are ordinary moto
    objects (ETags, sizes, listings as if PUT)."""
    import json
    import os

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    def seeded(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") != "/_statekeeper/seed":
            return app(environ, start_response)
        body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        pool = os.urandom(1 << 20)
        for i, (key, size) in enumerate(body["objects"]):
            start = (i * 4099) % (1 << 19)
            data = (pool[start:] + pool[:start]) * (size // len(pool) + 1) if size > len(pool) - start else b""
            value = data[:size] if data else pool[start:start + size]
            backend.put_object(body["bucket"], key, value)
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    return seeded


def install() -> None:
    S3Response.backend = _backend_once(S3Response.backend.fget)  # type: ignore[method-assign,assignment]
    S3Response.copy_object = _checked_copy(S3Response.copy_object, target_condition=True)  # type: ignore[method-assign]
    S3Response.upload_part_copy = _checked_copy(S3Response.upload_part_copy,  # type: ignore[method-assign]
                                                target_condition=False)
    S3Response._bucket_response_delete_keys = _checked_delete_keys(  # type: ignore[method-assign]
        S3Response._bucket_response_delete_keys)


if __name__ == "__main__":
    install()
    import os

    import moto.server

    if os.environ.get("STATEKEEPER_MOTO_SEED") == "1":
        dispatcher = moto.server.DomainDispatcherApplication
        original_call = dispatcher.__call__
        dispatcher.__call__ = lambda self, environ, start_response: _seeding(  # type: ignore[method-assign]
            lambda e, s: original_call(self, e, s))(environ, start_response)
    moto.server.main(sys.argv[1:])
