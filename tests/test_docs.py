"""Every reference in code and docs resolves inside this repository.

Comments, docstrings and docs cite files of the project (`ops/steps.py`, `docs/durability.md`)
and sections of the design notes under `docs/` (`docs/reference/domain.md §5.2`,
`docs/dagster-notes.md Q7`). This test fails when:

- a cited path under one of the project's folders does not exist (`domain/...` is read as
  `airwave_dagster/domain/...`; URLs and patterns such as `tests/…` or `ops/<job>/` are skipped);
- a cited section (`§N`, `QN`, `GN`) has no heading naming it in the cited notes file, or a bare
  `§N` cannot be found in any notes file the same source file names;
- a source still points outside the repository (`../shared/...`, `notes/...`, `spec/...`,
  "spec §N").
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml"}
SKIPPED_DIRS = {".git", ".venv", ".airwave", "node_modules", "__pycache__", "build", "dist"}
NOTES_FILE = Path("docs/dagster-notes.md")
SKIPPED_FILES = {Path("tests/test_docs.py")}

FOLDERS = ("airwave_dagster", "bench", "docs", "ops", "resources", "sensors", "tests", "domain")
SHORTHAND = {"domain/": "airwave_dagster/domain/"}  # docs/ai-lineup.md names `domain/ai/plan.py`
PATH = re.compile(r"(?<![\w./$~-])((?:" + "|".join(FOLDERS) + r")/[\w./-]*)")
PLACEHOLDER = re.compile(r"[*<{…]")  # `tests/…`, `ops/<job>/`, `docs/*.md`: patterns, not paths
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")

NOTES = re.compile(r"(?<![\w./-])docs/((?:reference/)?[\w-]+\.md)")
SECTION = re.compile(r"§\d+(?:\.\d+)*[a-z]?|\bQ\d+[a-z]?\b|\bG\d+\b")
# Sections listed right after a notes path: "§5.5 and §5.7", "Q4b", "(§1.3)", "G17, G18".
CITED_SECTIONS = re.compile(
    r"(?:[\s`(),;]|\band\b|\bor\b|\bto\b|§\d+(?:\.\d+)*[a-z]?|\bQ\d+[a-z]?\b|\bG\d+\b)*"
)
BARE_SECTION = re.compile(r"§\d+(?:\.\d+)*[a-z]?")
BARE_GOTCHA = re.compile(r"\((G\d+)\)")

OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "points outside the repository (../shared)"),
    (re.compile(r"(?<![\w./-])(?:notes|spec)/[\w-]+\.md"), "cites the research notes or spec"),
    (re.compile(r"dagster-findings"), "cites the research notes"),
    (re.compile(r"\bspec §"), "cites 'spec §N' without naming a file in docs/reference/"),
]


def _sources() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS.intersection(relative.parts) or relative in SKIPPED_FILES:
            continue
        if path.suffix in SUFFIXES and path.is_file():
            found.append(relative)
    return found


SOURCES = _sources()


def _text(relative: Path) -> str:
    return URL.sub("", (ROOT / relative).read_text(encoding="utf-8"))


@cache
def _headings(notes: str) -> frozenset[str]:
    """The section ids (`§5.2`, `Q7`, `G17`) named in the headings of a docs/ notes file."""
    path = ROOT / "docs" / notes
    if not path.is_file():
        return frozenset()
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(
        section for line in lines if line.startswith("#") for section in SECTION.findall(line)
    )


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def test_sources_are_found() -> None:
    assert Path("ops/steps.py") in SOURCES
    assert Path("docs/dagster-notes.md") in SOURCES


@pytest.mark.parametrize("relative", SOURCES, ids=str)
def test_cited_paths_exist(relative: Path) -> None:
    text = _text(relative)
    missing = []
    for match in PATH.finditer(text):
        cited = match.group(1)
        if PLACEHOLDER.match(text, match.end()):
            continue
        cited = cited.rstrip(".")
        for short, full in SHORTHAND.items():
            cited = full + cited.removeprefix(short) if cited.startswith(short) else cited
        if not (ROOT / cited).exists():
            missing.append(f"line {_line(text, match.start())}: {cited}")
    assert not missing, f"{relative} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("relative", SOURCES, ids=str)
def test_no_reference_outside_the_repository(relative: Path) -> None:
    text = _text(relative)
    found = [
        f"line {_line(text, match.start())}: {match.group(0)!r} {why}"
        for pattern, why in OUTSIDE
        for match in pattern.finditer(text)
    ]
    assert not found, f"{relative}: {found}"


@pytest.mark.parametrize("relative", SOURCES, ids=str)
def test_cited_sections_have_headings(relative: Path) -> None:
    text = _text(relative)
    unresolved = []
    named: set[str] = set()
    for match in NOTES.finditer(text):
        notes = match.group(1)
        named.add(notes)
        listed = CITED_SECTIONS.match(text, match.end())
        unresolved.extend(
            f"line {_line(text, match.start())}: docs/{notes} {section}"
            for section in SECTION.findall(listed.group(0) if listed else "")
            if section not in _headings(notes)
        )
    if relative.parts[:2] != ("docs", "reference") and relative != NOTES_FILE:
        # A bare "§4.3" or "(G17)" refers to a notes file the same source names elsewhere.
        headings = set().union(*(_headings(notes) for notes in named)) if named else set()
        for pattern in (BARE_SECTION, BARE_GOTCHA):
            for match in pattern.finditer(text):
                section = match.group(1) if pattern.groups else match.group(0)
                if section not in headings:
                    where = ", ".join(sorted(named)) or "no docs/ notes file"
                    unresolved.append(f"line {_line(text, match.start())}: {section} ({where})")
    assert not unresolved, f"{relative} cites sections without a heading: {unresolved}"
