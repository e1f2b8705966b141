"""A scripted model for the stub: a planner that returns a fixed plan, workers that verify it.

The responder reads each request the way a model would: the planner (forced to the plan tool)
answers with the given plan; a worker previews the proposed filter from its brief, then commits
it. Hooks let a test fail or slow a chosen call.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from airwave_dagster.domain.ai.prompts import PLANNER_TOOL_NAME

PROPOSED = "PROPOSED FILTER (verify it first):\n"

GENRES = ("Drama", "Comedy", "Action", "Horror", "Thriller", "Crime")


def genre_channel(genre: str, **extra: Any) -> dict[str, Any]:
    """A planned channel of one genre, movies and shows (pools of tens of hours on the emulator)."""
    channel = {
        "key": genre.lower().replace(" ", "-"),
        "name": f"{genre} TV",
        "description": f"{genre} around the clock.",
        "theme": f"Everything tagged {genre}.",
        "targetPoolSize": 100,
        "ordering": "SHUFFLE",
        "mediaTypes": ["movie", "show"],
        "filter": {
            "type": "group",
            "combinator": "and",
            "children": [{"type": "condition", "field": "genre", "op": "is", "value": genre}],
        },
    }
    channel.update(extra)
    return channel


def small_plan(genres: tuple[str, ...] = GENRES[:4]) -> dict[str, Any]:
    """Two packages sharing the genres (camelCase, as the planner tool returns it)."""
    half = (len(genres) + 1) // 2
    return {
        "packages": [
            {
                "key": "moods",
                "name": "Moods",
                "description": "Feelings.",
                "icon": "lucide:Smile",
                "accent": "blue",
                "channels": [genre_channel(g) for g in genres[:half]],
            },
            {
                "key": "thrills",
                "name": "Thrills",
                "description": "Adrenaline.",
                "icon": "lucide:Zap",
                "accent": "red",
                "channels": [genre_channel(g) for g in genres[half:]],
            },
        ]
    }


def brief_of(body: dict[str, Any]) -> str:
    """The per-channel brief (second text block of the first user message)."""
    return body["messages"][0]["content"][1]["text"]


def channel_name(body: dict[str, Any]) -> str:
    """The channel a worker request is about."""
    return brief_of(body).splitlines()[0].removeprefix("CHANNEL: ")


def is_planner(body: dict[str, Any]) -> bool:
    """Whether a request is the planner call."""
    return (body.get("tool_choice") or {}).get("name") == PLANNER_TOOL_NAME


def calls_by_channel(stub: Any) -> Counter[str]:
    """The stub's worker calls so far (SDK retries not counted), per channel name."""
    return Counter(
        channel_name(r.body) for r in stub.logical_calls() if r.body and not is_planner(r.body)
    )


class ScriptedModel:
    """A `Responder` playing planner and workers; counts calls per channel (thread-safe).

    Args:
        plan: What the planner returns (a list: one reply per planner call, the last repeats).
        fail: Called with (channel name, call index for that channel); a returned entry is
            played instead of the normal reply (an error, say).
    """

    def __init__(
        self,
        plan: dict[str, Any] | list[Any],
        fail: Callable[[str, int], dict[str, Any] | None] | None = None,
    ) -> None:
        self.plans = plan if isinstance(plan, list) else [plan]
        self.fail = fail
        self.lock = threading.Lock()
        self.planner_calls = 0
        self.worker_calls: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_planner(body):
            with self.lock:
                index = self.planner_calls
                self.planner_calls += 1
            reply = self.plans[min(index, len(self.plans) - 1)]
            if isinstance(reply, dict) and reply.get("kind"):
                return reply
            return {"kind": "tool_use", "name": PLANNER_TOOL_NAME, "input": reply}
        name = channel_name(body)
        with self.lock:
            index = self.worker_calls.get(name, 0)
            self.worker_calls[name] = index + 1
        if self.fail is not None:
            injected = self.fail(name, index)
            if injected is not None:
                return injected
        return self.worker_reply(body)

    @staticmethod
    def worker_reply(body: dict[str, Any]) -> dict[str, Any]:
        """Preview the proposed filter first, commit it after a preview result."""
        brief = brief_of(body)
        proposed = json.loads(brief.split(PROPOSED, 1)[1])
        media_line = next(line for line in brief.splitlines() if line.startswith("Media types:"))
        media = [m.strip() for m in media_line.split(":", 1)[1].split(",")]
        tool_input = {"mediaTypes": media, "filter": proposed}
        messages = body["messages"]
        if len(messages) == 1:
            return {
                "kind": "tool_use",
                "name": "preview_filter",
                "input": {**tool_input, "detail": "compact"},
                "text": "Let me check the proposed filter.",
            }
        return {"kind": "tool_use", "name": "commit_channel", "input": tool_input}
