"""Runs gcp-storage-emulator with the preconditions it ignores enforced: `python -m tests.plugins.gcs_emulator
start --host H --port P` (same arguments as `gcp-storage-emulator`).

The emulator (2026.7.19) accepts `ifGenerationMatch` and `ifSourceGenerationMatch` and then ignores them,
so a create-only write would silently replace an object and a read pinned to a generation would return
whatever is current. Real GCS answers 412 Precondition Failed. Without these checks the tests could not
tell a FileIO that sends the precondition from one that does not, so this launcher wraps the emulator's
handlers for uploads, downloads, metadata reads and rewrites: when the request carries one of those
parameters and the object's current generation (0 when absent) differs, it answers 412 with GCS's error
body before the emulator sees the request. Deletes get the check too (`ifGenerationMatch` on a single
DELETE, and on each DELETE inside a batch request, whose sub-request query the emulator does not even
parse): a live object of another generation answers 412 (in a batch, as that call's sub-response), a
missing one 404. Nothing else changes. (Real GCS evaluates an upload's precondition when the upload
completes; here it is checked when the upload starts, which is the same for the single-request uploads
the tests make.)
"""
from __future__ import annotations

import re
import sys
from http import HTTPStatus
from urllib.parse import parse_qs

from gcp_storage_emulator import server
from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects


def _generation(storage, bucket: str, name: str | None) -> str:
    if not name:
        return "0"
    try:
        return str(storage.get_file_obj(bucket, name)["generation"])
    except NotFound:
        return "0"


def _refuse(response, message: str) -> None:
    response.status = HTTPStatus.PRECONDITION_FAILED
    response.json({"error": {"code": 412, "message": message,
                             "errors": [{"reason": "conditionNotMet", "message": message}]}})


def _upload_name(request) -> str | None:
    if "name" in request.query:
        return request.query["name"][0]
    data = request.data  # parsed once and kept by the request, so the real handler still sees it
    if isinstance(data, dict) and isinstance(data.get("meta"), dict):
        return data["meta"].get("name")
    return None


def _checked(handler, *, name_of, source: bool = False):
    def wrapper(request, response, storage, *args, **kwargs):
        bucket = request.params.get("bucket_name")
        want = request.query.get("ifGenerationMatch", [None])[0]
        if want is not None:
            target_bucket = request.params.get("dest_bucket_name", bucket) if source else bucket
            target_name = request.params.get("dest_object_id") if source else name_of(request)
            if _generation(storage, target_bucket, target_name) != want:
                return _refuse(response, "At least one of the pre-conditions you specified did not hold.")
        want_source = request.query.get("ifSourceGenerationMatch", [None])[0]
        if source and want_source is not None:
            if _generation(storage, bucket, request.params.get("object_id")) != want_source:
                return _refuse(response, "At least one of the pre-conditions you specified did not hold.")
        return handler(request, response, storage, *args, **kwargs)
    return wrapper


def _object_id(request) -> str | None:
    return request.params.get("object_id")


def _checked_delete(handler):
    checked = _checked(handler, name_of=_object_id)

    def wrapper(request, response, storage, *args, **kwargs):
        if _generation(storage, request.params.get("bucket_name"), _object_id(request)) == "0":
            return handler(request, response, storage, *args, **kwargs)   # missing: 404, as GCS answers
        return checked(request, response, storage, *args, **kwargs)
    return wrapper


_WRAPPED = {
    objects.insert: _checked(objects.insert, name_of=_upload_name),
    objects.download: _checked(objects.download, name_of=_object_id),
    objects.get: _checked(objects.get, name_of=_object_id),
    objects.delete: _checked_delete(objects.delete),
    objects.rewrite: _checked(objects.rewrite, name_of=_object_id, source=True),
    objects.copy: _checked(objects.copy, name_of=_object_id, source=True),
}


def _batch_item_with_query(original):
    """The emulator's batch sub-request parser, keeping the sub-request's query (it drops it)."""
    def parse(item):
        parsed = original(item)
        first = next((line for line in item.get_payload().splitlines() if line.strip()), "")
        match = re.match(r"^\w+\s+(\S+)", first)
        if match and "?" in match.group(1):
            parsed["query"] = parse_qs(match.group(1).split("?", 1)[1])
        return parsed
    return parse


def _checked_batch_delete(handler):
    def wrapper(request, item, storage, bucket_name, object_id, meta, response):
        want = (item.get("query") or {}).get("ifGenerationMatch", [None])[0]
        live = _generation(storage, bucket_name, object_id)
        if want is not None and live not in ("0", want):   # missing: the handler answers 404
            message = "At least one of the pre-conditions you specified did not hold."
            objects._batch_write_json(response, "HTTP/1.1 412 Precondition Failed",
                                      {"error": {"code": 412, "message": message,
                                                 "errors": [{"reason": "conditionNotMet", "message": message}]}})
            return True
        return handler(request, item, storage, bucket_name, object_id, meta, response)
    return wrapper


def install() -> None:
    server._parse_batch_item = _batch_item_with_query(server._parse_batch_item)
    objects._BATCH_METHOD_HANDLERS["DELETE"] = _checked_batch_delete(objects._BATCH_METHOD_HANDLERS["DELETE"])
    server.HANDLERS = tuple((regex, {method: _WRAPPED.get(fn, fn) for method, fn in handlers.items()})
                            for regex, handlers in server.HANDLERS)


if __name__ == "__main__":
    install()
    from gcp_storage_emulator.__main__ import main

    main(sys.argv[1:])
