"""The anthropic adapter: the planner's one structured-output call and the per-channel agent loop.

Usage is reported for **every** API call the moment it returns (through `on_usage`), so tokens
spent before a later call fails are never lost: the caller charges them to the budget ledger and
the trace as they come. A failure after some calls raises `LlmCallError` carrying the usage and the
agent steps gathered so far.

The API key is read when a client is built, from the environment variable the resource names
(`ANTHROPIC_API_KEY` by default); it never enters run config, logs or messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg
from opentelemetry import trace
from pydantic import Field

from airwave_dagster import tracing
from airwave_dagster.domain.ai.models import output_cap
from airwave_dagster.domain.ai.usage import Usage
from airwave_dagster.settings import API_KEY_ENV, BASE_URL_ENV

if TYPE_CHECKING:
    # The SDK is imported where a call is made or classified, never on import: it is most of
    # the code location's load (1.2 of 2.6 CPU seconds on the 2-core machine), which every run
    # worker of every job paid, and only an `ai_lineup` step calls the model (its step processes
    # get it preloaded: `ops.steps.LLM_PRELOAD`).
    import anthropic

DEFAULT_PLANNER_MODEL = "claude-opus-4-8"
DEFAULT_WORKER_MODEL = "claude-haiku-4-5"

SDK_NON_STREAMING_MAX_TOKENS = 21_333
"""Above this `max_tokens` the SDK refuses a non-streaming call (it could outlast 10 minutes)."""

PLANNER_MAX_TOKENS = 32_000
"""The planner's output cap (a 26-channel plan used ~10k tokens; truncation looks like bad JSON)."""

WORKER_MAX_TOKENS = 4_096
"""Worker replies are a few tool calls; kept under the non-streaming ceiling on purpose."""

MAX_AGENT_CALLS = 24
"""Model calls one channel's agent may make (docs/reference/ai-lineup.md §6.3)."""

UsageSink = Callable[[str, Usage], None]
"""Called with (model, usage) after every API call that returned usage."""

SpendNotes = Callable[[Usage], Mapping[str, float | int | str | bool]]
"""The attributes a model call's span gets from its usage: its cost, the build's, the budget."""

_spend_notes: ContextVar[SpendNotes | None] = ContextVar("airwave_spend_notes", default=None)


class MissingApiKeyError(RuntimeError):
    """The anthropic provider was asked for but its key variable is empty."""


class BudgetStop(Exception):
    """Raised by a `before_call` hook: the budget is exhausted, make no further model call."""


TRUNCATED_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
"""Stop reasons of a reply cut off before the model finished: never taken as complete
(platform.claude.com/docs/en/build-with-claude/handling-stop-reasons)."""

SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "contract_spend_limit_reached"})
"""`error.details.error_code` of a 429 that no wait will cure: the organization's spend limit
(SDK types `EnforcedSpendLimitReachedError`, `ContractSpendLimitReachedError`)."""


class LlmCallError(RuntimeError):
    """A model call failed (after the SDK's own retries); what was spent before is attached.

    Attributes:
        usage: Tokens of the calls that succeeded before the failure.
        calls: Model calls that succeeded before the failure.
        transient: True for rate limits, overload, 5xx and timeouts: a later resume may succeed.
        needs_operator: The API refused for a reason only a person can fix (a spend limit, a
            refused key, an unknown model, a request it will never accept): a resume fails the
            same way until then.
        error_code: The API's `error.details.error_code`, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        usage: Usage,
        calls: int,
        transient: bool,
        needs_operator: bool = False,
        error_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.calls = calls
        self.transient = transient
        self.needs_operator = needs_operator
        self.error_code = error_code

    @classmethod
    def of(
        cls, error: BaseException, *, usage: Usage | None = None, calls: int = 0
    ) -> LlmCallError:
        """The adapter's error for an SDK failure, classified (see `_describe`)."""
        text, transient = _describe(error)
        import anthropic

        code = getattr(error, "error_code", None)
        code = code if isinstance(code, str) else None
        needs_operator = not transient and isinstance(error, anthropic.APIStatusError)
        if needs_operator:
            text += (
                ". This needs the operator: "
                + (
                    "the organization's API spend limit is reached; raise it in the Anthropic "
                    "Console"
                    if code in SPEND_LIMIT_CODES
                    else "the API refused the request and will refuse it again"
                )
                + " (a resume fails the same way until then)"
            )
        return cls(
            text,
            usage=usage or Usage(),
            calls=calls,
            transient=transient,
            needs_operator=needs_operator,
            error_code=code,
        )


def _stop_retrying_spend_limits(request: Any, call_next: Any) -> Any:
    """SDK middleware: a spend-limit 429 is final, so the SDK must not retry it.

    The SDK retries every 429 unless the response says `x-should-retry: false`; a spend limit
    stays reached however long one waits, so the header is set on that response here.
    """
    response = call_next(request)
    if response.status_code == 429:
        try:
            body = response.http_response.json()
        except ValueError:
            return response
        error = body.get("error") if isinstance(body, dict) else None
        details = error.get("details") if isinstance(error, dict) else None
        code = details.get("error_code") if isinstance(details, dict) else None
        if code in SPEND_LIMIT_CODES:
            response.http_response.headers["x-should-retry"] = "false"
    return response


@contextmanager
def spend_notes(notes: SpendNotes) -> Iterator[None]:
    """Model calls made in the block put `notes(usage)` on their spans (when tracing is on)."""
    token = _spend_notes.set(notes)
    try:
        yield
    finally:
        _spend_notes.reset(token)


def _note_spend(request: Any, call_next: Any) -> Any:
    """SDK middleware (tracing on): the call's spend on the SDK's own GenAI span.

    It runs inside that span, whose token counts the SDK records itself. A streamed reply's
    usage is known only once the stream is read, and reading it ends the SDK's span: that spend
    goes on the step's span instead (`_note_streamed`).
    """
    response = call_next(request)
    notes = _spend_notes.get()
    span = trace.get_current_span()
    if notes is not None and span.is_recording() and response.status_code == 200:
        if not request.stream:
            span.set_attributes(notes(_usage_of(response.parse())))
    return response


def _note_streamed(usage: Usage) -> None:
    notes = _spend_notes.get()
    if notes is not None:
        tracing.note(notes(usage))


@dataclass
class PlannerReply:
    """What the planner call returned: the forced tool's input, or why there is none."""

    model: str
    tool_input: object | None
    stop_reason: str | None
    raw_text: str
    usage: Usage


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call as sent back to the model; `terminal` ends the loop."""

    content: str
    is_error: bool = False
    terminal: bool = False


ToolExecutor = Callable[[str, Mapping[str, Any]], ToolOutcome]


@dataclass
class AgentRun:
    """One channel's agent loop: how it ended and its usage (every call summed)."""

    model: str
    stop: str
    calls: int = 0
    usage: Usage = field(default_factory=Usage)


def _describe(error: BaseException) -> tuple[str, bool]:
    """A message for an SDK failure (no request body, no key) and whether it is transient.

    A status error is transient exactly when the SDK's own policy would retry it (the
    `x-should-retry` header first, then 408, 409, 429 and 5xx), except a spend limit.
    """
    import anthropic

    if isinstance(error, anthropic.APIStatusError):
        should_retry = error.response.headers.get("x-should-retry")
        if error.status_code == 200:  # an error event in the middle of a stream
            transient = True
        elif should_retry in ("true", "false"):
            transient = should_retry == "true"
        else:
            transient = error.status_code in (408, 409, 429) or error.status_code >= 500
        code = getattr(error, "error_code", None)
        if code in SPEND_LIMIT_CODES:
            transient = False
        detail = getattr(error, "api_message", None) or error.message
        kind = f"{error.type}, {code}" if isinstance(code, str) else f"{error.type}"
        return f"Anthropic API error {error.status_code} ({kind}): {detail}", transient
    if isinstance(error, anthropic.APITimeoutError):
        return "Anthropic API call timed out (after the SDK's retries)", True
    if isinstance(error, anthropic.APIConnectionError):
        return f"cannot reach the Anthropic API: {error}", True
    # Mid-stream transport failures arrive unwrapped (httpx2 ReadTimeout, RemoteProtocolError).
    name = type(error).__name__
    transient = name in ("ReadTimeout", "RemoteProtocolError", "ReadError", "JSONDecodeError")
    return f"Anthropic API call failed: {name}: {error}", transient


def _usage_of(message: Any) -> Usage:
    usage = getattr(message, "usage", None)
    return Usage.from_api(None if usage is None else usage.model_dump())


def _blocks(message: Any) -> list[dict[str, Any]]:
    """The assistant turn to send back: each block with exactly the keys the API sent."""
    return [block.model_dump(exclude_none=True) for block in message.content]


def worker_opening(context_block: str, brief: str | None) -> list[dict[str, Any]]:
    """The worker's first user turn: the shared context (cache breakpoint), then the brief.

    With `brief=None` it is the cacheable prefix alone, as `count_tokens` measures it.
    """
    content: list[dict[str, Any]] = [
        {"type": "text", "text": context_block, "cache_control": {"type": "ephemeral"}}
    ]
    if brief is not None:
        content.append({"type": "text", "text": brief})
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class PromptMeasure:
    """The worker's first request, counted by the API: its cacheable prefix and its brief."""

    prefix_tokens: int
    brief_tokens: int


class LlmClient:
    """A configured anthropic client with the calls the builder makes."""

    def __init__(self, client: anthropic.Anthropic) -> None:
        self._client = client

    def measure_worker_prompt(
        self,
        *,
        model: str,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        context_block: str,
        brief: str,
    ) -> PromptMeasure:
        """Count the worker's prefix and one brief with `count_tokens` (free, no cache effect).

        The prefix is what the prompt cache would store: tools, system and the context block,
        exactly as `run_agent` sends them; whether it is cached depends on the model's minimum.

        Raises:
            LlmCallError: The API refused or failed the count.
        """
        prefix = self._count(model, system, tools, worker_opening(context_block, None))
        whole = self._count(model, system, tools, worker_opening(context_block, brief))
        return PromptMeasure(prefix_tokens=prefix, brief_tokens=max(0, whole - prefix))

    def _count(
        self,
        model: str,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        messages: list[dict[str, Any]],
    ) -> int:
        try:
            counted = self._client.messages.count_tokens(
                model=model,
                system=system,
                tools=list(tools),  # type: ignore[arg-type]
                messages=messages,  # type: ignore[arg-type]
            )
        except Exception as error:
            raise LlmCallError.of(error) from error
        return counted.input_tokens

    def plan(
        self,
        *,
        model: str,
        system: str,
        content: Sequence[Mapping[str, Any]],
        tool: Mapping[str, Any],
        max_tokens: int = PLANNER_MAX_TOKENS,
        on_usage: UsageSink,
    ) -> PlannerReply:
        """One forced tool-use call; streamed when `max_tokens` exceeds the SDK's limit.

        Args:
            model: Planner model id.
            system: The planner's system prompt.
            content: The user message's content blocks (the last one carries the cache mark).
            tool: `{name, description, input_schema}` of the plan tool; the call is forced to it.
            max_tokens: Output cap.
            on_usage: Receives the call's usage, also when the stream breaks half way.

        Raises:
            LlmCallError: The API failed after the SDK's retries.
        """
        # Asking for more than the model can write is a 400 (claude-3-5-haiku stops at 8,192).
        max_tokens = output_cap(model, max_tokens)
        request: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": list(content)}],
            "tools": [dict(tool)],
            "tool_choice": {"type": "tool", "name": tool["name"]},
        }
        if max_tokens > SDK_NON_STREAMING_MAX_TOKENS:
            message = self._streamed(request, model, on_usage)
        else:
            try:
                message = self._client.messages.create(**request)
            except Exception as error:
                raise LlmCallError.of(error) from error
            on_usage(model, _usage_of(message))
        tool_input = next(
            (b.input for b in message.content if b.type == "tool_use" and b.name == tool["name"]),
            None,
        )
        raw_text = (
            json.dumps(tool_input, ensure_ascii=False)
            if tool_input is not None
            else "".join(getattr(b, "text", "") for b in message.content)
        )
        return PlannerReply(
            model=model,
            tool_input=tool_input,
            stop_reason=message.stop_reason,
            raw_text=raw_text,
            usage=_usage_of(message),
        )

    def _streamed(self, request: Mapping[str, Any], model: str, on_usage: UsageSink) -> Any:
        stream_manager = self._client.messages.stream(**request)
        snapshot: Any = None
        try:
            with stream_manager as stream:
                for _event in stream:
                    snapshot = stream.current_message_snapshot
                message = stream.get_final_message()
                _note_streamed(_usage_of(message))
        except Exception as error:
            # The input tokens (and output so far) of a broken stream were billed all the same.
            partial = _usage_of(snapshot) if snapshot is not None else Usage()
            if snapshot is not None:
                on_usage(model, partial)
            raise LlmCallError.of(error, usage=partial) from error
        on_usage(model, _usage_of(message))
        return message

    def run_agent(
        self,
        *,
        model: str,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        context_block: str,
        brief: str,
        execute: ToolExecutor,
        on_usage: UsageSink,
        on_text: Callable[[str], None] = lambda text: None,
        before_call: Callable[[], None] = lambda: None,
        max_calls: int = MAX_AGENT_CALLS,
        max_tokens: int = WORKER_MAX_TOKENS,
    ) -> AgentRun:
        """The worker loop: call, run the requested tools, answer with their results, repeat.

        The request prefix is tools → system → the shared-context block (cache breakpoint), so
        every build of a run sends a byte-identical, cacheable prefix; the brief follows uncached.
        The loop ends when the model stops asking for tools, right after a terminal tool
        (commit/give up) succeeded, at `max_calls`, or when `before_call` raises `BudgetStop`.

        Raises:
            LlmCallError: An API call failed; `usage`/`steps` hold what came before.
        """
        messages = worker_opening(context_block, brief)
        max_tokens = output_cap(model, max_tokens)
        run = AgentRun(model=model, stop="end_turn")
        while True:
            if run.calls >= max_calls:
                run.stop = "max_calls"
                return run
            try:
                before_call()
            except BudgetStop:
                run.stop = "budget"
                return run
            try:
                message = self._client.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    system=system,
                    tools=list(tools),  # type: ignore[arg-type]
                    messages=messages,  # type: ignore[arg-type]
                )
            except Exception as error:
                raise LlmCallError.of(error, usage=run.usage, calls=run.calls) from error
            run.calls += 1
            usage = _usage_of(message)
            run.usage = run.usage + usage
            on_usage(model, usage)
            uses = [b for b in message.content if b.type == "tool_use"]
            for block in message.content:
                if block.type == "text":
                    on_text(block.text)
            if message.stop_reason != "tool_use" or not uses:
                run.stop = message.stop_reason or "end_turn"
                return run
            messages.append({"role": "assistant", "content": _blocks(message)})
            results: list[dict[str, Any]] = []
            finished = False
            for use in uses:
                outcome = execute(use.name, use.input if isinstance(use.input, dict) else {})
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": outcome.content,
                }
                if outcome.is_error:
                    result["is_error"] = True
                results.append(result)
                finished = finished or (outcome.terminal and not outcome.is_error)
            if finished:
                # The channel is committed (or given up): its result needs no model reply.
                run.stop = "terminal_tool"
                return run
            messages.append({"role": "user", "content": results})


class LlmResource(dg.ConfigurableResource):
    """Anthropic's Messages API through the official `anthropic` SDK.

    The key is read from the environment variable named by `api_key_env_var` when a client is
    built (an unset `dg.EnvVar` would fail every run at start-up, even offline ones, so the
    variable is looked up through `dg.EnvVar(...).get_value()` only when the anthropic provider
    is actually used).

    Examples:
        llm = LlmResource()  # ANTHROPIC_API_KEY, and ANTHROPIC_BASE_URL when set
    """

    api_key_env_var: str = Field(
        default=API_KEY_ENV,
        description="Name of the environment variable holding the API key (never the key).",
    )
    base_url: str | None = Field(
        default=None,
        description="Messages API base URL, e.g. a local stub; unset uses ANTHROPIC_BASE_URL "
        "when set, else Anthropic's own.",
    )
    max_retries: int = Field(
        default=2, description="SDK retries of 408/409/429/5xx/529 and timeouts, with backoff."
    )
    timeout_seconds: float = Field(default=600.0, description="Read timeout of each API call.")

    def has_key(self) -> bool:
        """Whether the key variable is set (decides the default provider)."""
        return bool(dg.EnvVar(self.api_key_env_var).get_value())

    def missing_key_message(self) -> str:
        """The refusal shown when the anthropic provider has no key."""
        return (
            f"provider 'anthropic' needs an API key in the environment variable "
            f"{self.api_key_env_var}, which is not set; set it, or use provider 'offline'"
        )

    def get_client(self) -> LlmClient:
        """A client for this process.

        Raises:
            MissingApiKeyError: The key variable is unset or empty.
        """
        import anthropic

        key = dg.EnvVar(self.api_key_env_var).get_value()
        if not key:
            raise MissingApiKeyError(self.missing_key_message())
        base_url = self.base_url or dg.EnvVar(BASE_URL_ENV).get_value() or None
        kwargs: dict[str, Any] = {
            "api_key": key,
            "max_retries": self.max_retries,
            # With tracing on, the SDK's spans get the spend (`_note_spend`).
            "middleware": [_stop_retrying_spend_limits]
            + ([_note_spend] if tracing.enabled() else []),
        }
        if base_url:
            kwargs["base_url"] = base_url
        if self.timeout_seconds != 600.0:
            kwargs["timeout"] = anthropic.Timeout(self.timeout_seconds, connect=5.0)
        return LlmClient(anthropic.Anthropic(**kwargs))
