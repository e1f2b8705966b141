"""Usage and prompt-cache model of the LLM stub: deterministic token estimates and cache hits."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from dataclasses import dataclass
from typing import Any

# The real API looks back about 20 blocks from a breakpoint for an earlier cache entry; that is
# what lets an agent loop move its breakpoint to the newest turn and still read the old prefix.
LOOKBACK_SEGMENTS = 20
MAX_BREAKPOINTS = 4


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces, so equal content always gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(value: Any) -> int:
    """A quarter of the canonical JSON length, at least 1: plausible, cheap and deterministic."""
    return max(1, math.ceil(len(canonical(value)) / 4))


@dataclass(frozen=True, slots=True)
class Segment:
    """One cacheable unit of a request: a tool, a system block, or a message content block."""

    key: str
    tokens: int
    breakpoint: bool


def _without_cache_control(block: Any) -> Any:
    # A marker is where to cache, not what: moving it to a later turn must keep the prefix equal.
    if isinstance(block, dict):
        return {name: value for name, value in block.items() if name != "cache_control"}
    return block


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and block.get("cache_control") is not None


def segments(body: dict[str, Any]) -> list[Segment]:
    """Split a request into segments in the API's cache order: tools, then system, then messages."""
    found: list[Segment] = []

    def add(prefix: str, block: Any) -> None:
        stripped = _without_cache_control(block)
        found.append(
            Segment(f"{prefix}:{canonical(stripped)}", estimate_tokens(stripped), _marked(block))
        )

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            add("system", block)
    elif system:
        add("system", system)
    for message in body.get("messages") or []:
        role = message.get("role", "")
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                add(role, block)
        else:
            add(role, content)
    if body.get("cache_control") is not None and found:
        last = found[-1]
        found[-1] = Segment(last.key, last.tokens, True)
    return found


def count_breakpoints(body: dict[str, Any]) -> int:
    """Blocks that carry an explicit `cache_control` (the API allows at most four)."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        blocks.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks.extend(content)
    return sum(1 for block in blocks if _marked(block))


def total_tokens(body: dict[str, Any]) -> int:
    """All input tokens of a request, as `count_tokens` reports them."""
    return sum(segment.tokens for segment in segments(body))


class PromptCache:
    """Prefixes seen so far, keyed by a running hash over the model and the segments.

    One lock covers looking up and storing, so of several identical first calls exactly one
    pays the cache write (the real API may bill more; tests should not pin that).
    """

    def __init__(self, min_cache_tokens: int = 0) -> None:
        """Create an empty cache; prefixes shorter than `min_cache_tokens` are never cached."""
        if min_cache_tokens < 0:
            raise ValueError(f"min_cache_tokens must be >= 0, got {min_cache_tokens}")
        self.min_cache_tokens = min_cache_tokens
        self._lock = threading.Lock()
        self._stored: set[str] = set()

    def reset(self) -> None:
        """Forget every cached prefix."""
        with self._lock:
            self._stored.clear()

    def __len__(self) -> int:
        """How many prefixes are cached."""
        with self._lock:
            return len(self._stored)

    def charge(self, body: dict[str, Any]) -> dict[str, int]:
        """Input usage of one successful request, storing its breakpoint prefixes.

        Returns:
            `input_tokens`, `cache_creation_input_tokens` and `cache_read_input_tokens`.
        """
        parts = segments(body)
        hashes, prefix = _running(str(body.get("model", "")), parts)
        total = prefix[-1] if prefix else 0
        breakpoints = [index for index, part in enumerate(parts) if part.breakpoint]
        with self._lock:
            read = 0
            for point in breakpoints:
                for index in range(point, max(-1, point - LOOKBACK_SEGMENTS), -1):
                    if hashes[index] in self._stored:
                        read = max(read, prefix[index])
                        break
            creation = 0
            if breakpoints:
                last = breakpoints[-1]
                if hashes[last] not in self._stored and prefix[last] >= self.min_cache_tokens:
                    creation = prefix[last] - read
            for point in breakpoints:
                if prefix[point] >= self.min_cache_tokens:
                    self._stored.add(hashes[point])
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }


def _running(model: str, parts: list[Segment]) -> tuple[list[str], list[int]]:
    digest = hashlib.sha256(model.encode())
    hashes: list[str] = []
    prefix: list[int] = []
    tokens = 0
    for part in parts:
        digest.update(b"\x00" + part.key.encode())
        hashes.append(digest.copy().hexdigest())
        tokens += part.tokens
        prefix.append(tokens)
    return hashes, prefix
