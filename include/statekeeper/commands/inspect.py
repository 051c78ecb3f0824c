"""`statekeeper inspect <path | s3 uri of a _metadata or snapshot dir> [--json] [--top N]`."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator

from statekeeper.cli import EXIT_OK, CommandUsageError, InputNotFoundError

NAME = "inspect"
HELP = (
    "Explain one checkpoint/savepoint `_metadata`: version, type, where its bytes go (inline "
    "state per operator vs references) and what it references outside its own directory."
)



def configure(parser) -> None:
    parser.add_argument("target", help="a `_metadata` file or a snapshot directory (local path, or a file://, s3://, oss://, gs:// or abfss:// URI)")
    parser.add_argument("--json", action="store_true", help="emit the report as JSON (schema in statekeeper.inspect.metadata)")
    parser.add_argument("--top", type=int, default=5, metavar="N", help="largest inline contributors per operator (default 5)")


def _is_remote(target: str) -> bool:
    scheme, sep, _ = target.partition("://")
    return bool(sep) and scheme.lower() != "file"


@contextmanager
def open_input(target: str) -> Iterator[tuple[Any, str]]:
    """Yield (seekable binary source, canonical `_metadata` URI) for a local path or a URI.

    Local paths and file:// URIs need nothing else; other schemes go through statekeeper.storage
    (imported lazily so the codec and local inspection work without it).
    """
    from statekeeper.uri import normalize_uri

    if not _is_remote(target):
        import os

        path = normalize_uri(os.path.abspath(target) if not target.startswith("file:") else target)[len("file://"):]
        if os.path.isdir(path):
            path = os.path.join(path, "_metadata")
        if not os.path.isfile(path):
            raise InputNotFoundError(f"{target}: no such `_metadata` file or snapshot directory")
        with open(path, "rb") as fh:
            yield fh, "file://" + path
        return

    from statekeeper.storage import file_io
    from statekeeper.storage.errors import ObjectNotFoundError

    fio = file_io()
    uri = normalize_uri(target)
    candidates = [uri] if uri.endswith("/_metadata") else [uri + "/_metadata", uri]
    for candidate in candidates:
        try:
            info = fio.stat(candidate)
        except ObjectNotFoundError:
            continue
        with fio.open_input(candidate, info=info) as stream:
            yield stream, candidate
        return
    raise InputNotFoundError(f"{target}: no `_metadata` object found (tried {', '.join(candidates)})")


def run(args) -> int:
    from statekeeper.format import read_metadata
    from statekeeper.inspect.metadata import build_report, render_text, to_json

    if args.top < 0:
        raise CommandUsageError("--top must be >= 0")
    with open_input(args.target) as (source, uri):
        model = read_metadata(source, uri)
        report = build_report(model, uri, top=args.top)
    sys.stdout.write(to_json(report) + "\n" if args.json else render_text(report))
    return EXIT_OK
