"""The XML body of an S3 DeleteObjects request, built as one string instead of by botocore's serializer.

GC sends DeleteObjects of 1,000 keys, each with its planned ETag, millions of keys per run. botocore turns the
request's parameters into an ElementTree and serializes it: about 6.4 ms of CPU per 1,000 keys (measured with
parameter validation off), more than the rest of the client's work for that request; a string join of the same
document takes 0.4 ms. The document is the same bytes botocore would send (tests/storage compare them for keys
that need escaping), and everything else about the request stays botocore's: endpoint, signing, checksum (CRC32
of the final body, computed after `before-call`), the `\\r`/`\\n` escaping of its own `before-call` handler, which
runs after ours.

How the body gets into the request, without botocore's private members: the caller calls `delete_objects` with
an empty object list and hands the body over through a thread-local slot (`sending(body)`); the `before-call`
hook registered by `install(client)` takes it from the slot and replaces the request's body. The hook runs in the
calling thread, before anything is signed or sent. If the hook did not run (a client made elsewhere), the
request that went out deleted nothing (an empty list), and `sending` raises, so no key is reported deleted that
was not.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

# What `delete_objects` is called with while the real body rides in the slot: on its own it deletes nothing.
PLACEHOLDER: dict[str, Any] = {"Objects": [], "Quiet": True}

_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_EVENT = "before-call.s3.DeleteObjects"
_slot = threading.local()


class PrebuiltBodyNotSent(RuntimeError):
    """The client sent DeleteObjects without the prebuilt body (its hook is missing): nothing was deleted."""


def _text(value: str) -> str:
    # ElementTree's escaping of element text (botocore's serializer): only these three, `&` first.
    if "&" in value:
        value = value.replace("&", "&amp;")
    if "<" in value:
        value = value.replace("<", "&lt;")
    if ">" in value:
        value = value.replace(">", "&gt;")
    return value


def delete_objects_body(keys: Sequence[str], etags: Sequence[str] | None = None) -> bytes:
    """The quiet `<Delete>` document for `keys` (with `etags[i]`, quoted as S3 lists it, as key i's
    precondition): only failed keys are answered."""
    if etags is None:
        objects = "".join(f"<Object><Key>{_text(k)}</Key></Object>" for k in keys)
    else:
        if len(etags) != len(keys):
            raise ValueError(f"{len(etags)} ETags for {len(keys)} keys")
        objects = "".join(f"<Object><Key>{_text(k)}</Key><ETag>{_text(e)}</ETag></Object>"
                          for k, e in zip(keys, etags))
    return f'<Delete xmlns="{_NAMESPACE}">{objects}<Quiet>true</Quiet></Delete>'.encode()


def _swap_body(params: dict[str, Any], **_: Any) -> None:
    body = getattr(_slot, "body", None)
    if body is not None:
        _slot.body = None   # one request per body: a second call in this thread never reuses it
        params["body"] = body


def install(client: Any) -> None:
    """Let `client` send prebuilt DeleteObjects bodies (ahead of botocore's own handlers for the event, so that
    its newline escaping sees the real body)."""
    client.meta.events.register_first(_EVENT, _swap_body, unique_id="statekeeper-s3-delete-body")


@contextmanager
def sending(body: bytes) -> Iterator[None]:
    """Around one `client.delete_objects(Bucket=..., Delete=PLACEHOLDER)` call in this thread: that request
    carries `body`. Raises PrebuiltBodyNotSent after the call if it did not."""
    _slot.body = body
    try:
        yield
    finally:
        unused = getattr(_slot, "body", None) is not None
        _slot.body = None
    if unused:
        raise PrebuiltBodyNotSent("DeleteObjects went out without its prebuilt body (the client was not made by "
                                  "statekeeper.storage.s3.make_s3_client); it deleted nothing")
