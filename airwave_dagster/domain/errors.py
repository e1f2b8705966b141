"""Errors raised by the Airwave domain, all rooted at `AirwaveError`.

The tree::

    AirwaveError                 anything Airwave refuses on purpose (catch this one at the edges)
     ├── LineupFileError         an uploaded lineup file is unreadable or breaks the v1 format
     ├── FilterError             a `plexFilter` envelope is malformed or names unusable fields
     ├── PlanSchemaError         the AI planner's lineup plan breaks the plan schema
     └── ToolError               a channel builder's tool call fails (the model sees the message)

The first three carry every problem found, not only the first, as `Issue` values: a JSON path into
the offending document (`$.channels[2].number`) and a message naming the bad value and what is
allowed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict


class Issue(BaseModel):
    """One problem in a JSON document: where it is and what is wrong with it."""

    model_config = ConfigDict(frozen=True)

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


LineupIssue = Issue
"""A problem found in a lineup file (`LineupFileError.issues`)."""


class AirwaveError(Exception):
    """Base of every error the Airwave domain raises deliberately."""


class LineupFileError(AirwaveError):
    """A lineup file could not be read or does not follow the v1 format.

    Attributes:
        source: The file name or path shown to the user.
        issues: Every problem found, in document order.
    """

    def __init__(self, source: str, issues: Sequence[Issue]) -> None:
        self.source = source
        self.issues = list(issues)
        super().__init__(_render(f"lineup file {source!r}", self.issues))


class FilterError(AirwaveError):
    """A `plexFilter` envelope is malformed or cannot be resolved as written.

    Attributes:
        issues: Every problem found, in document order.
    """

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = list(issues)
        super().__init__(_render("filter", self.issues))


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


def _render(subject: str, issues: Sequence[Issue]) -> str:
    count = len(issues)
    noun = "problem" if count == 1 else "problems"
    lines = [f"{subject} is invalid ({count} {noun}):"]
    lines.extend(f"  {issue}" for issue in issues)
    return "\n".join(lines)


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
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"string {shown!r}"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """Suggest the closest allowed spellings of a mistyped name.

    Args:
        word: What the document said.
        choices: Every allowed spelling.

    Returns:
        `" (did you mean 'x'?)"` (or `'x' or 'y'`), or an empty string when nothing is close.
    """
    folded = [choice for choice in choices if choice.casefold() == word.casefold()]
    close = folded or difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(choice) for choice in close) + "?)"
