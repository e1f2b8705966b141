"""Errors raised by the Airwave domain, all rooted at `AirwaveError`.

The tree::

    AirwaveError                 anything Airwave refuses on purpose (catch this one at the edges)
     ├── LineupFileError         an uploaded lineup file is unreadable or breaks the v1 format
     ├── FilterError             a `plexFilter` envelope is malformed or names unusable fields
     ├── PlanSchemaError         the AI planner's lineup plan breaks the plan schema
     └── ToolError               a channel builder's tool call fails (the model sees the message)

The first three carry the problems found, not only the first, as `Issue` values: a JSON path into
the offending document (`$.channels[2].number`) and a message naming the bad value and what is
allowed. A hostile file can hold millions of problems, so collection stops at
`MAX_COLLECTED_ISSUES` and the message lists the first `MAX_LISTED_ISSUES`, each line cut to
`MAX_ISSUE_CHARS`: a refusal stays small (well under 20 kB) whatever the file.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

MAX_LISTED_ISSUES = 50
"""Problems spelled out in an error message; the rest are counted."""

MAX_COLLECTED_ISSUES = 1000
"""Validation stops after this many problems: nobody fixes a file from the thousandth one."""

MAX_ISSUE_CHARS = 300
"""Longest line of an error message; a path or message beyond it is cut."""

MAX_ECHO_CHARS = 80
"""Longest rendering of a value the document holds, echoed back in a message."""


class Issue(BaseModel):
    """One problem in a JSON document: where it is and what is wrong with it."""

    model_config = ConfigDict(frozen=True)

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


LineupIssue = Issue
"""A problem found in a lineup file (`LineupFileError.issues`)."""


class Note(BaseModel):
    """Something the importer read differently from the letter of the file, and how.

    Files the reference system writes hold values it accepts but this format forbids (`is` on a
    text field, `""` for a boolean, …); they are normalised instead of refused, and each change is
    a note in the dry-run and the report.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class AirwaveError(Exception):
    """Base of every error the Airwave domain raises deliberately."""


class TooManyIssues(Exception):
    """Raised by `IssueList.append` once it holds MAX_COLLECTED_ISSUES; validation stops there."""


class IssueList(list[Issue]):
    """The problems of one document, refusing to grow without bound.

    Appending the MAX_COLLECTED_ISSUES-th problem raises `TooManyIssues`, so a validator walking
    millions of bad values stops early instead of formatting a message for each one; the caller
    catches it and reports what was collected, marked `truncated`.
    """

    truncated: bool = False

    def append(self, issue: Issue, /) -> None:
        super().append(issue)
        if len(self) >= MAX_COLLECTED_ISSUES:
            self.truncated = True
            raise TooManyIssues

    def extend(self, issues: Iterable[Issue], /) -> None:
        for issue in issues:
            self.append(issue)


class LineupFileError(AirwaveError):
    """A lineup file could not be read or does not follow the v1 format.

    Attributes:
        source: The file name or path shown to the user.
        issues: The problems found, in document order (at most MAX_COLLECTED_ISSUES).
        truncated: Validation stopped at MAX_COLLECTED_ISSUES; the file has more problems.
    """

    def __init__(self, source: str, issues: Sequence[Issue], *, truncated: bool = False) -> None:
        self.source = source
        self.issues = list(issues)
        self.truncated = truncated or getattr(issues, "truncated", False)
        super().__init__(
            _render(
                f"lineup file {shorten(source, MAX_ISSUE_CHARS)!r}",
                self.issues,
                truncated=self.truncated,
            )
        )


class FilterError(AirwaveError):
    """A `plexFilter` envelope is malformed or cannot be resolved as written.

    Attributes:
        issues: Every problem found, in document order.
    """

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = list(issues)
        self.truncated = getattr(issues, "truncated", False)
        super().__init__(_render("filter", self.issues, truncated=self.truncated))


class PlanSchemaError(AirwaveError):
    """The planner's tool input does not follow the plan schema.

    Attributes:
        issues: Every violation, each with a JSON path such as `$.packages[0].channels[2].name`.
    """

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = list(issues)
        count = len(self.issues)
        lines = [f"the planner's lineup plan breaks the schema ({count} problem(s)):"]
        lines.extend(f"  {issue}" for issue in self.issues[:50])
        if count > 50:
            lines.append(f"  ... and {count - 50} more")
        super().__init__("\n".join(lines))


class ToolError(AirwaveError):
    """A tool call the model should see fail: returned as an error tool result, loop continues."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _render(subject: str, issues: Sequence[Issue], *, truncated: bool = False) -> str:
    count = len(issues)
    noun = "problem" if count == 1 else "problems"
    counted = (
        f"at least {count:,} problems; checking stopped there" if truncated else f"{count} {noun}"
    )
    lines = [f"{subject} is invalid ({counted}):"]
    lines.extend(
        f"  {shorten(str(issue), MAX_ISSUE_CHARS)}" for issue in issues[:MAX_LISTED_ISSUES]
    )
    if count > MAX_LISTED_ISSUES:
        more = count - MAX_LISTED_ISSUES
        lines.append(f"  ... and {more:,}{'+' if truncated else ''} more not listed")
    return "\n".join(lines)


def shorten(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """Cut a text echoed from a document to `limit` characters, marking the cut.

    Args:
        text: Any text, possibly megabytes long.
        limit: Longest result.

    Returns:
        `text` itself when short enough, else its start and `...`.
    """
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quoted(text: str) -> str:
    """`repr` of a document's string, cut to MAX_ECHO_CHARS first so a message stays small."""
    return repr(shorten(text))


def describe_value(value: object) -> str:
    """Name a JSON value for an error message, e.g. `number 5.5` or `string 'abc'`.

    Args:
        value: Any value decoded from JSON.

    Returns:
        The JSON type and a short rendering of the value.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        # str() of a huge integer is slow and long; its size says enough.
        return f"number {value!r}" if abs(value) < 10**30 else "a very large number"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {shorten(value, 60)!r}"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


MAX_SUGGESTION_CHOICES = 200
"""`did_you_mean` compares spellings only against this many allowed names (fuzzy matching costs
time per pair); a longer list gets only a case-insensitive match."""


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """Suggest the closest allowed spellings of a mistyped name.

    Bounded in cost: a word longer than MAX_ECHO_CHARS is nobody's typo and gets no suggestion,
    and fuzzy matching is skipped over more than MAX_SUGGESTION_CHOICES choices.

    Args:
        word: What the document said.
        choices: Every allowed spelling.

    Returns:
        `" (did you mean 'x'?)"` (or `'x' or 'y'`), or an empty string when nothing is close.
    """
    if len(word) > MAX_ECHO_CHARS:
        return ""
    folded_word = word.casefold()
    folded = [choice for choice in choices if choice.casefold() == folded_word][:3]
    close = folded
    if not close and len(choices) <= MAX_SUGGESTION_CHOICES:
        short = [choice for choice in choices if len(choice) <= MAX_ECHO_CHARS]
        close = difflib.get_close_matches(word, short, n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(quoted(choice) for choice in close) + "?)"
