"""The README a user reads first: the title, then the two commands, and short enough to read.

The benchmark history and the long user-guide sections live under docs/; these checks keep the README from
growing back into them and from pointing at files that moved.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# `](target)`: a Markdown link's or image's target; a target with a space would need <...>, which the README
# never uses.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def _first_code_block(lines: list[str]) -> tuple[int, list[str]]:
    """(index of the opening fence, the lines inside the first fenced block)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    return start, lines[start + 1:end]


def test_the_title_then_the_two_commands_come_first():
    lines = _lines()
    start, block = _first_code_block(lines)
    before = [line for line in lines[:start] if line.strip()]
    assert len(before) == 1 and before[0].startswith("# "), before
    commands = [line for line in block if line.strip()]
    assert len(commands) == 2, commands
    for command, target in zip(commands, ("demo", "test")):
        # the command, then a comment that says what it does
        assert re.fullmatch(rf"make {target}\s+#\s*\S.*", command), command


def test_the_readme_stays_short():
    assert len(_lines()) < 300


def test_every_relative_link_in_the_readme_names_a_file_that_exists():
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    relative = [t for t in targets if not t.startswith(("http://", "https://", "#", "mailto:"))]
    assert relative, "no relative links found: the pattern no longer matches the README's links"
    missing = [t for t in relative if not (README.parent / t.split("#", 1)[0]).exists()]
    assert not missing, missing


def test_the_benchmark_history_has_its_own_page():
    assert (ROOT / "docs" / "benchmarks.md").is_file()
