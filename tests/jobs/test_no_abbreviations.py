"""No command line of Statekeeper takes an abbreviated option: argparse's default would bind a prefix to the one
option it starts, and on a command that deletes a misspelt option must be refused, not become another one (GC's
`--roots true` was `--roots-complete true`: every ownerless job directory judged deletable)."""
from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from statekeeper import cli
from statekeeper.launch import entrypoint
from statekeeper.jobs.registry import JOBS

REPO = Path(__file__).resolve().parents[2]
# Where the project builds parsers: the library, the entry points, the benchmarks, the plugin and the DAGs.
SOURCES = ("include/statekeeper", "spark_jobs", "bench", "plugins", "dags")


def _refused(parser: argparse.ArgumentParser, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_gc_refuses_a_prefix_of_its_options(capsys):
    from spark_jobs.collect_garbage import parser

    gc = parser()
    err = _refused(gc, ["--warehouse", "/tmp/wh", "--roots", "true"], capsys)
    assert "unrecognized arguments: --roots true" in err, err
    for argv in (["--exec", "gc-1"], ["--mode", "delete", "--older", "1s"], ["--roots-comp"], ["--allow-short"]):
        assert "unrecognized arguments" in _refused(gc, ["--warehouse", "/tmp/wh", *argv], capsys), argv
    _refused(gc, ["--ware", "/tmp/wh"], capsys)
    # The whole names still parse.
    args = gc.parse_args(["--warehouse", "/tmp/wh", "--roots-complete", "--execute", "gc-1"])
    assert args.roots_complete is True and args.execute == "gc-1"


def test_the_cli_refuses_a_prefix_of_its_options(capsys, tmp_path):
    parser = cli.build_parser()
    err = _refused(parser, ["inspect", str(tmp_path), "--js"], capsys)
    assert "unrecognized arguments: --js" in err, err
    _refused(parser, ["explain", "--ware", str(tmp_path)], capsys)
    _refused(parser, ["report", "--warehouse", str(tmp_path), "--mast", "local[1]"], capsys)
    assert parser.parse_args(["inspect", str(tmp_path), "--json"]).json is True


def test_every_parser_of_the_jobs_and_the_cli_refuses_abbreviations():
    parsers = {spec.entry_point: entrypoint.build_parser(importlib.import_module(spec.entry_module).ENTRY)
               for spec in JOBS}
    top = cli.build_parser()
    parsers["statekeeper"] = top
    for action in top._subparsers._group_actions:
        parsers.update({f"statekeeper {name}": sub for name, sub in action.choices.items()})
    assert len(parsers) > len(JOBS) + 1
    assert [name for name, p in parsers.items() if p.allow_abbrev] == []


def _says_no_abbreviations(call: ast.Call) -> bool:
    return any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def test_every_parser_the_project_builds_says_so():
    """Parsers built inside a `main` (the launchers, the benchmarks) are reached only by running them: every call
    that builds one (ArgumentParser, and add_parser, whose parser inherits nothing) says allow_abbrev=False."""
    calls = []
    for base in SOURCES:
        for path in sorted((REPO / base).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                    if name in ("ArgumentParser", "add_parser"):
                        calls.append((f"{path.relative_to(REPO)}:{node.lineno}", _says_no_abbreviations(node)))
    assert len(calls) >= 17, calls
    assert [where for where, ok in calls if not ok] == []
