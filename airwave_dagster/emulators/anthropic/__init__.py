"""A local Anthropic Messages-API server that plays scripted replies to the real `anthropic` SDK."""

from airwave_dagster.emulators.anthropic.script import (
    Entry,
    ScriptError,
    error_reply,
    spend_limit_reply,
    text_reply,
    tool_use_reply,
)
from airwave_dagster.emulators.anthropic.server import (
    LLMStub,
    Responder,
    StubRequest,
    run_llm_stub,
    start_llm_stub,
)
from airwave_dagster.emulators.anthropic.usage import PromptCache

__all__ = [
    "Entry",
    "LLMStub",
    "PromptCache",
    "Responder",
    "ScriptError",
    "StubRequest",
    "error_reply",
    "run_llm_stub",
    "spend_limit_reply",
    "start_llm_stub",
    "text_reply",
    "tool_use_reply",
]
