"""Scripted errors, the SDK's exception classes and retries as the stub observes them."""

from __future__ import annotations

import json
import time

import anthropic
import pytest

from airwave_dagster.emulators.anthropic import LLMStub, error_reply, text_reply
from tests.emulators.anthropic.conftest import MODEL, ClientFactory, user

FAST_RETRY = {"retry-after-ms": "1"}


@pytest.mark.parametrize(
    ("status", "exception", "error_type"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (404, anthropic.NotFoundError, "not_found_error"),
        (409, anthropic.ConflictError, "conflict_error"),
        (413, anthropic.APIStatusError, "request_too_large"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_status_maps_to_the_sdk_exception(
    stub: LLMStub,
    client: anthropic.Anthropic,
    status: int,
    exception: type[anthropic.APIStatusError],
    error_type: str,
) -> None:
    stub.add(error_reply(status, "scripted failure"))

    with pytest.raises(exception) as caught:
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])

    error = caught.value
    assert error.status_code == status
    assert error.type == error_type
    assert error.api_message == "scripted failure"
    assert error.request_id is not None and error.request_id.startswith("req_")
    assert stub.requests[0].status == status


def test_overloaded_is_an_internal_server_error(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add(error_reply(529, "Overloaded"))

    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])


def test_retries_are_separate_requests_of_one_logical_call(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(
        error_reply(429, "slow down", headers=FAST_RETRY),
        error_reply(529, "Overloaded", headers=FAST_RETRY),
        text_reply("third time lucky"),
    )

    message = client_for(stub, max_retries=2).messages.create(
        model=MODEL, max_tokens=16, messages=[user("q")]
    )

    assert message.content[0].text == "third time lucky"  # type: ignore[union-attr]
    assert [record.retry_count for record in stub.requests] == [0, 1, 2]
    assert [record.status for record in stub.requests] == [429, 529, 200]
    assert len({record.raw for record in stub.requests}) == 1
    assert len(stub.logical_calls()) == 1
    stats = stub.stats()
    assert stats["replies"] == 1 and stats["by_status"] == {200: 1, 429: 1, 529: 1}


def test_retries_give_up_after_max_retries(stub: LLMStub, client_for: ClientFactory) -> None:
    stub.add(*[error_reply(500, "boom", headers=FAST_RETRY) for _ in range(4)])

    with pytest.raises(anthropic.InternalServerError):
        client_for(stub, max_retries=2).messages.create(
            model=MODEL, max_tokens=16, messages=[user("q")]
        )

    assert len(stub.requests) == 3 and len(stub.remaining()) == 1


def test_should_retry_header_overrides_the_status(stub: LLMStub, client_for: ClientFactory) -> None:
    stub.add(
        error_reply(529, "no retry", headers={"x-should-retry": "false"}),
        error_reply(400, "retry me", headers={"x-should-retry": "true", **FAST_RETRY}),
        text_reply("ok"),
    )
    client = client_for(stub, max_retries=2)

    with pytest.raises(anthropic.OverloadedError):
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
    assert len(stub.requests) == 1

    assert client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")]).content
    assert len(stub.requests) == 3


def test_retry_after_header_sets_the_gap(stub: LLMStub, client_for: ClientFactory) -> None:
    stub.add(error_reply(429, "wait", headers={"retry-after-ms": "250"}), text_reply("ok"))

    client_for(stub, max_retries=1).messages.create(
        model=MODEL, max_tokens=16, messages=[user("q")]
    )

    first, second = stub.requests
    assert 0.24 <= second.t - first.t < 1.0


def test_streamed_request_is_retried_on_an_error_before_the_stream(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(error_reply(529, "Overloaded", headers=FAST_RETRY), text_reply("streamed"))

    with client_for(stub, max_retries=1).messages.stream(
        model=MODEL, max_tokens=64_000, messages=[user("q")]
    ) as stream:
        assert stream.get_final_text() == "streamed"
    assert [record.status for record in stub.requests] == [529, 200]


def test_slow_reply_times_out_and_a_retry_can_succeed(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(text_reply("too late", delay=1.5), text_reply("in time"))

    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError):
        client_for(stub, timeout=0.2).messages.create(
            model=MODEL, max_tokens=16, messages=[user("q")]
        )
    assert time.monotonic() - started < 1.2  # gave up before the reply came
    assert (
        client_for(stub, timeout=2.0)
        .messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
        .content
    )


def test_malformed_json_raises_a_decode_error(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add({"kind": "malformed"})

    with pytest.raises(json.JSONDecodeError):
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])


def test_latency_is_added_to_every_call(client_for: ClientFactory) -> None:
    with LLMStub([text_reply("a"), text_reply("b")], latency=0.15) as slow:
        client = client_for(slow)
        started = time.monotonic()
        for _ in range(2):
            client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
        elapsed = time.monotonic() - started

    assert 0.3 <= elapsed < 1.0


def test_a_stopped_stub_refuses_connections(client_for: ClientFactory) -> None:
    stopped = LLMStub([text_reply("never")])
    client = client_for(stopped)
    stopped.stop()

    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
