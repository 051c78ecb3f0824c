"""The `statekeeper` console script.

Subcommands live in `statekeeper.commands`, one module per command; each module defines
`NAME`, `HELP`, `configure(parser)` and `run(args) -> int` and is found automatically, so adding a
command never touches this file. Exit codes are shared by all commands (see EXIT_*).

0 and 2 mean what they mean for the Spark jobs (statekeeper.registry.ExitCode); the other
codes are the commands' own: a command answers a question about one object, so "the object is
missing" and "its `_metadata` is corrupt" get codes of their own, where a job's 1 and 3 speak of a
whole run. A command raises; `main` alone turns an error into its exit code and one line on stderr
(`exit_code_of`), so every command says the same thing for the same error.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Optional, Sequence

from statekeeper.errors import StatekeeperError
from statekeeper.registry import ExitCode

EXIT_OK = ExitCode.OK
EXIT_USAGE = ExitCode.USAGE  # argparse's own code for bad arguments
EXIT_BAD_METADATA = 3  # corrupt, truncated or unsupported `_metadata`
EXIT_NOT_FOUND = 4  # input does not exist
EXIT_ERROR = 1  # any other Statekeeper error


class CommandUsageError(StatekeeperError):
    """The command's arguments cannot be answered as given (exit EXIT_USAGE)."""


class InputNotFoundError(StatekeeperError):
    """The path or URI given to a command does not exist (exit EXIT_NOT_FOUND)."""


def exit_code_of(exc: StatekeeperError) -> int:
    """The exit code of a command that raised `exc`: the most specific class wins."""
    from statekeeper.format import MetadataFormatError
    from statekeeper.storage.errors import ObjectNotFoundError

    if isinstance(exc, CommandUsageError):
        return EXIT_USAGE
    if isinstance(exc, (InputNotFoundError, ObjectNotFoundError)):
        return EXIT_NOT_FOUND
    if isinstance(exc, MetadataFormatError):
        return EXIT_BAD_METADATA
    return EXIT_ERROR


def _command_modules():
    from statekeeper import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if all(hasattr(module, a) for a in ("NAME", "HELP", "configure", "run")):
            yield module


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations (here and in every subcommand): a prefix of an option would bind to whichever option it
    # happens to start, today's or one added later.
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="statekeeper", description="Maintenance for Apache Flink checkpoint storage."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        # A subcommand's parser is built by add_parser and does not inherit allow_abbrev.
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, allow_abbrev=False)
        module.configure(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except StatekeeperError as exc:
        print(f"statekeeper {args.command}: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    except BrokenPipeError:  # `statekeeper inspect ... | head`
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # `python -m statekeeper.cli` runs this file as __main__, a second copy beside the statekeeper.cli the commands
    # import: its error classes would not be theirs, and every error would map to EXIT_ERROR.
    from statekeeper.cli import main as _main

    sys.exit(_main())
