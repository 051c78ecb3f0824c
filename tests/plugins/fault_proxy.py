"""A fault-injecting HTTP proxy in front of the session's S3 endpoint (SeaweedFS): real throttling for tests.

`FaultProxy` listens on 127.0.0.1 (a free port), forwards every request unchanged to the server behind it (`slow_s3`:
the session's SeaweedFS, `s3_config`; the Host header reaches it as the client signed it, so its signature check
passes), and answers a configurable share of the matching requests itself with HTTP 503 and S3's `SlowDown` error
body, as S3 does when a prefix is over its request rate. It counts what it injected, so a test can relate the
retries a client reports to the faults it really met, and what it forwarded, by kind and by bucket.

    def test_x(slow_s3):
        slow_s3.set_faults(every=3)                     # every 3rd DeleteObjects request
        slow_s3.set_faults(share=0.3, seed=7, kinds={"delete", "list", "head"})
        client_config = slow_s3.config                  # a StorageConfig pointing at the proxy
        ... slow_s3.injected ... slow_s3.forwarded["list"] ... slow_s3.forwarded_to["bucket"]["head"] ...

`ignore_delete_preconditions = True` makes the endpoint behave like an S3-compatible store that accepts the
per-object `<ETag>` of DeleteObjects and ignores it: the proxy drops those elements (and the body checksum with
them) before the server sees the request, and signs the request again with the upstream's keys (the server checks
the signature over the body it gets), so every listed key is deleted unconditionally.

`drop_preconditions({"if-match", "x-amz-copy-source-if-match", "if-none-match"})` is the mutation of our own
requests: those headers are removed (the request signed again) from every request except those for the stores'
self-test keys (`<root>/_statekeeper_probe/...`), as if a mover or deleter stopped sending them while the self-test
still proves the server enforces them. A precondition test that still passes under it does not test the
precondition.
"""
from __future__ import annotations

import http.client
import random
import re
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

from statekeeper.storage import StorageConfig
from statekeeper.storage.enforcement import PROBE_DIR

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te"})
_SLOW_DOWN = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
              "<Message>Please reduce your request rate.</Message><RequestId>{rid}</RequestId>"
              "<HostId>statekeeper-fault-proxy</HostId></Error>")
KINDS = frozenset({"delete", "list", "head", "get", "put", "other"})
PRECONDITION_HEADERS = frozenset({"if-match", "if-none-match", "x-amz-copy-source-if-match"})


def request_kind(method: str, path: str) -> str:
    """What an S3 request does, from its method and query (path-style addressing)."""
    query = urlparse(path).query
    params = {part.partition("=")[0] for part in query.split("&") if part}
    if method == "POST" and "delete" in params:
        return "delete"
    if method == "GET" and ("list-type" in params or path.rstrip("/").count("/") <= 1):
        return "list"
    return {"HEAD": "head", "GET": "get", "PUT": "put"}.get(method, "other")


class FaultProxy:
    def __init__(self, upstream: StorageConfig) -> None:
        if upstream.endpoint is None:
            raise ValueError("FaultProxy needs an S3 endpoint URL to forward to (the session's SeaweedFS)")
        self._upstream_config = upstream
        parsed = urlparse(upstream.endpoint)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._lock = threading.Lock()
        self._random = random.Random(0)
        self._share = 0.0
        self._every: int | None = None
        self._first: int | None = None
        self._kinds: frozenset[str] = frozenset({"delete"})
        self._matched = 0
        self.ignore_delete_preconditions = False
        self._dropped: frozenset[str] = frozenset()
        self.dropped = 0                        # requests whose preconditions were removed
        self.injected = 0                       # faults answered so far
        self.injected_by_kind: Counter[str] = Counter()
        self.forwarded: Counter[str] = Counter()  # requests passed to the server, by kind
        self.forwarded_to: defaultdict[str, Counter[str]] = defaultdict(Counter)  # the same, per bucket
        self._local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"   # keep-alive, as boto3's connection pool expects

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.config = upstream.with_overrides(endpoint=self.endpoint)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()

    def set_faults(self, *, share: float = 0.0, every: int | None = None, first: int | None = None, seed: int = 0,
                   kinds: set[str] | frozenset[str] = frozenset({"delete"})) -> None:
        """Inject a 503 SlowDown into `share` (0..1, seeded random) of the requests of `kinds`, into
        every `every`-th of them, or into the next `first` of them and no more (a burst that outlasts a
        client's own retries). `share=0, every=None, first=None` turns injection off. Counters stay."""
        unknown = set(kinds) - KINDS
        if unknown:
            raise ValueError(f"unknown request kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {share}")
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if first is not None and first < 0:
            raise ValueError(f"first must be >= 0, got {first}")
        with self._lock:
            self._share, self._every, self._first, self._kinds = share, every, first, frozenset(kinds)
            self._random = random.Random(seed)
            self._matched = 0

    def drop_preconditions(self, headers: set[str] | frozenset[str]) -> None:
        """Remove `headers` (of PRECONDITION_HEADERS) from every request but the self-test's; empty: stop."""
        unknown = set(headers) - PRECONDITION_HEADERS
        if unknown:
            raise ValueError(f"not precondition headers: {sorted(unknown)}; known: {sorted(PRECONDITION_HEADERS)}")
        with self._lock:
            self._dropped = frozenset(headers)

    def _should_fail(self, kind: str) -> bool:
        with self._lock:
            if kind not in self._kinds:
                return False
            self._matched += 1
            if self._first is not None:
                fail = self._matched <= self._first
            elif self._every is not None:
                fail = self._matched % self._every == 0
            else:
                fail = self._share > 0 and self._random.random() < self._share
            if fail:
                self.injected += 1
                self.injected_by_kind[kind] += 1
            return fail

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
            handler.send_error(501, "the fault proxy does not forward chunked request bodies")
            return
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""   # always drained: the connection stays usable
        kind = request_kind(handler.command, handler.path)
        if self._should_fail(kind):
            payload = b"" if handler.command == "HEAD" else _SLOW_DOWN.format(rid=uuid.uuid4().hex).encode()
            handler.send_response(503)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        headers_in = handler.headers.items()
        if kind == "delete" and self.ignore_delete_preconditions:
            body = re.sub(rb"<ETag>[^<]*</ETag>", b"", body)
            headers_in = [(k, v) for k, v in headers_in if not k.lower().startswith(("x-amz-checksum-", "content-md5"))
                          and k.lower() not in ("content-length", "x-amz-sdk-checksum-algorithm")]
            headers_in.append(("Content-Length", str(len(body))))
            headers_in = self._signed_again(handler.command, handler.path, headers_in, body)
        dropped = self._dropped
        if dropped and f"/{PROBE_DIR}/" not in handler.path and any(k.lower() in dropped for k, _ in headers_in):
            headers_in = self._signed_again(handler.command, handler.path,
                                            [(k, v) for k, v in headers_in if k.lower() not in dropped], body)
            with self._lock:
                self.dropped += 1
        status, reason, headers, data = self._forward(handler.command, handler.path, headers_in, body)
        bucket = urlparse(handler.path).path.lstrip("/").partition("/")[0]   # path-style addressing
        with self._lock:
            self.forwarded[kind] += 1
            self.forwarded_to[bucket][kind] += 1
        handler.send_response(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and (name.lower() != "content-length" or handler.command == "HEAD"):
                handler.send_header(name, value)
        if handler.command != "HEAD":
            handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def _signed_again(self, method: str, path: str, headers: list[tuple[str, str]],
                      body: bytes) -> list[tuple[str, str]]:
        """`headers` with a SigV4 signature over `body` (the upstream's keys): the server checks the signature
        against the body it gets, and the client signed the body before the proxy changed it."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        config = self._upstream_config
        kept = {k: v for k, v in headers if k.lower() not in ("authorization", "x-amz-date", "x-amz-content-sha256")}
        host = next(v for k, v in kept.items() if k.lower() == "host")   # as the client sent it (the proxy's)
        request = AWSRequest(method, f"http://{host}{path}", data=body, headers=kept)
        S3SigV4Auth(Credentials(config.access_key_id, config.secret_access_key), "s3",
                    config.region or "us-east-1").add_auth(request)
        return list(request.headers.items())

    def _forward(self, method: str, path: str, headers: list[tuple[str, str]],
                 body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):  # a pooled upstream connection may have been closed by the server: reconnect once
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(*self._upstream, timeout=120)
            try:
                conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP:
                        conn.putheader(name, value)
                conn.endheaders(body or None)
                response = conn.getresponse()
                data = response.read()
                return response.status, response.reason, response.getheaders(), data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def slow_s3(s3_config: StorageConfig) -> Iterator[FaultProxy]:
    """A FaultProxy in front of the session's S3 endpoint (SeaweedFS, `s3_config`): it forwards the signed Host
    header unchanged, so the server's signature check passes, and the server itself enforces the preconditions
    (none of our checks). No faults until `set_faults` is called."""
    proxy = FaultProxy(s3_config)
    try:
        yield proxy
    finally:
        proxy.stop()
