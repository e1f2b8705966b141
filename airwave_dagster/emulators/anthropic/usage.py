"""Usage and prompt-cache model of the LLM stub: deterministic token estimates and cache hits."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airwave_dagster.emulators.anthropic.models import find_model

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


FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
TTL_SECONDS = {"5m": FIVE_MINUTES, "1h": ONE_HOUR}
"""Cache lifetimes a `cache_control` may ask for; each use refreshes the entry for free."""


@dataclass(slots=True)
class _Entry:
    ttl: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Charge:
    """The usage of one request, and the cache entries its response will make usable."""

    usage: dict[str, int]
    writes: tuple[tuple[str, float], ...]


def _ttl(block: Any) -> float:
    control = block.get("cache_control") if isinstance(block, dict) else None
    if isinstance(control, dict):
        return TTL_SECONDS.get(str(control.get("ttl", "5m")), FIVE_MINUTES)
    return FIVE_MINUTES


class PromptCache:
    """Prefixes written so far, keyed by a running hash over the model and the segments.

    Follows Anthropic's prompt-caching guide (platform.claude.com/docs/en/build-with-claude/
    prompt-caching):

    - a prefix shorter than the model's minimum cacheable length is neither written nor read
      (`floor_for(model)`; `min_cache_tokens` overrides it for every model, 0 caches anything);
    - an entry becomes usable only once the response that wrote it has begun, so identical
      requests sent before that each pay the write (`begin` looks up, `publish` makes the
      writes usable; `charge` does both at once);
    - an entry lives 5 minutes from its last use, or 1 hour when its `cache_control` says
      `"ttl": "1h"`; a read refreshes it.
    """

    def __init__(
        self,
        min_cache_tokens: int | None = None,
        *,
        floor_for: Callable[[str], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create an empty cache.

        Args:
            min_cache_tokens: One floor for every model (a permissive test option); None uses
                each model's documented floor from `floor_for`.
            floor_for: The floor of a model id; by default the stub's model table.
            clock: Seconds, monotonic; tests pass a fake one to expire entries.
        """
        if min_cache_tokens is not None and min_cache_tokens < 0:
            raise ValueError(f"min_cache_tokens must be >= 0, got {min_cache_tokens}")
        self.min_cache_tokens = min_cache_tokens
        self._floor_for = floor_for or _documented_floor
        self._clock = clock
        self._lock = threading.Lock()
        self._stored: dict[str, _Entry] = {}

    def floor(self, model: str) -> int:
        """The shortest prefix this cache writes or reads for a model."""
        if self.min_cache_tokens is not None:
            return self.min_cache_tokens
        return self._floor_for(model)

    def reset(self) -> None:
        """Forget every cached prefix."""
        with self._lock:
            self._stored.clear()

    def __len__(self) -> int:
        """How many prefixes are cached and alive."""
        with self._lock:
            now = self._clock()
            return sum(1 for entry in self._stored.values() if entry.expires_at > now)

    def charge(self, body: dict[str, Any]) -> dict[str, int]:
        """Usage of one request whose response begins at once (its writes usable right away)."""
        charge = self.begin(body)
        self.publish(charge)
        return charge.usage

    def begin(self, body: dict[str, Any]) -> Charge:
        """Input usage of one request as it arrives; its writes wait for `publish`.

        Returns:
            The usage (`input_tokens`, `cache_creation_input_tokens`,
            `cache_read_input_tokens`, and `cache_creation` split by lifetime) and the writes.
        """
        model = str(body.get("model", ""))
        floor = self.floor(model)
        parts = segments(body)
        blocks = _blocks_in_order(body)
        hashes, prefix = _running(model, parts)
        total = prefix[-1] if prefix else 0
        breakpoints = [index for index, part in enumerate(parts) if part.breakpoint]
        with self._lock:
            now = self._clock()
            read = 0
            for point in breakpoints:
                for index in range(point, max(-1, point - LOOKBACK_SEGMENTS), -1):
                    entry = self._stored.get(hashes[index])
                    if entry is not None and entry.expires_at > now and prefix[index] >= floor:
                        read = max(read, prefix[index])
                        entry.expires_at = now + entry.ttl  # a use refreshes the lifetime
                        break
            writes: list[tuple[str, float]] = []
            creation = 0
            lifetime = FIVE_MINUTES
            for point in breakpoints:
                entry = self._stored.get(hashes[point])
                alive = entry is not None and entry.expires_at > now
                if prefix[point] >= floor and not alive:
                    writes.append((hashes[point], _ttl(blocks[point])))
            if breakpoints:
                last = breakpoints[-1]
                if any(key == hashes[last] for key, _ in writes):
                    creation = prefix[last] - read
                    lifetime = _ttl(blocks[last])
        usage = {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "ephemeral_5m_input_tokens": creation if lifetime == FIVE_MINUTES else 0,
            "ephemeral_1h_input_tokens": creation if lifetime == ONE_HOUR else 0,
        }
        return Charge(usage=usage, writes=tuple(writes))

    def publish(self, charge: Charge) -> None:
        """The response of a `begin` has started: its written prefixes become readable."""
        with self._lock:
            now = self._clock()
            for key, ttl in charge.writes:
                entry = self._stored.get(key)
                if entry is None or entry.expires_at <= now or entry.ttl < ttl:
                    self._stored[key] = _Entry(ttl=ttl, expires_at=now + ttl)
                else:
                    entry.expires_at = max(entry.expires_at, now + entry.ttl)


def _documented_floor(model: str) -> int:
    spec = find_model(model)
    # An unknown model never gets this far (404); 1,024 is the smallest documented floor.
    return 1_024 if spec is None else spec.min_cache_tokens


def _blocks_in_order(body: dict[str, Any]) -> list[Any]:
    """The blocks behind `segments(body)`, in the same order (to read their `cache_control`)."""
    found: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        found.extend(system)
    elif system:
        found.append(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            found.extend(content)
        else:
            found.append(content)
    if body.get("cache_control") is not None and found:
        found[-1] = {"cache_control": body["cache_control"]}
    return found


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
