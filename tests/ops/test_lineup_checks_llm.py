"""The shared lineup checks on the Anthropic path: a scripted model through the stub (issue 10).

The real anthropic SDK talks to the local stub; the script plays a worker that proposes what
the plan says and reacts to refusals the way a model would: it gives up on a channel the commit
says repeats another one, and adds a rating ceiling when the commit says the channel is above
it. Each build is judged against the channels planned before it (as the job hands them over).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from airwave_dagster.domain.ai.curate import resolve
from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.plan import sanitize_plan
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.ai.usage import PriceTable
from ops.ai_lineup.channel_build import run_build
from ops.ai_lineup.checkpoints import BuildTask, LineupSettings
from resources.llm import LlmResource
from resources.plex import PlexClient
from resources.stores.ai import AiStore, media_items
from tests.fakes.scripted_model import ScriptedModel, brief_of, genre_channel
from tests.ops.test_channel_build import SHARED, _deps
from tests.support.ai import STUB_KEY_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.plex]

KIDS_CEILING = {
    "type": "group",
    "combinator": "or",
    "children": [
        {"type": "condition", "field": "contentRating", "op": "is", "value": rating}
        for rating in ("G", "TV-Y", "TV-Y7", "TV-G")
    ],
}


def _plan() -> dict[str, Any]:
    drama = genre_channel("Drama", name="Drama Movies", mediaTypes=["movie"])
    # The same pool under another name and filter (every film runs over an hour; an identical
    # filter would be dropped by the sanitiser as a duplicate), and a kids channel with no
    # rating ceiling.
    again = genre_channel("Drama", key="serious", name="Serious Films", mediaTypes=["movie"])
    again["filter"]["children"].append(
        {"type": "condition", "field": "duration", "op": "gte", "value": "60"}
    )
    kids = genre_channel("Animation", key="toons", name="Kids Cartoons")
    return {
        "packages": [{"key": "p", "name": "P", "description": "", "channels": [drama, again, kids]}]
    }


class RefusalAwareModel(ScriptedModel):
    """Previews, commits, and then reacts to the commit's refusal like a model would."""

    @staticmethod
    def worker_reply(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        last = messages[-1]["content"] if len(messages) > 1 else []
        refusal = " ".join(
            block.get("content", "") if isinstance(block.get("content"), str) else ""
            for block in last
            if isinstance(block, dict) and block.get("type") == "tool_result"
        )
        if "repeats channel" in refusal:
            return {
                "kind": "tool_use",
                "name": "give_up",
                "input": {"reason": "another channel of the lineup already plays this"},
            }
        if "above that ceiling" in refusal:
            proposed = json.loads(brief_of(body).split("PROPOSED FILTER (verify it first):\n")[1])
            fixed = {"type": "group", "combinator": "and", "children": [proposed, KIDS_CEILING]}
            return {
                "kind": "tool_use",
                "name": "commit_channel",
                "input": {"mediaTypes": ["movie", "show"], "filter": fixed},
            }
        return ScriptedModel.worker_reply(body)


def test_the_worker_commit_refuses_overlap_and_wrong_audience(
    synced, store, plex_emulator, stub
) -> None:
    model = RefusalAwareModel(_plan())
    stub.responder = model
    plan = sanitize_plan(_plan()).plan
    numbering = assign_numbers(plan, [])
    settings = LineupSettings(
        provider="anthropic",
        planner_model="claude-opus-4-8",
        worker_model="claude-haiku-4-5",
        limit=0,
        budget_usd=None,
        confirm_wipe=False,
        rules=PoolRules(),
        planner_attempts=1,
        prices=PriceTable(),
        ledger_id="ledger-checks",
        source_id=synced,
        started_at=datetime.now(UTC),
    )
    order = [channel for _, channel in plan.channels()]
    client = LlmResource(api_key_env_var=STUB_KEY_ENV, base_url=stub.url).get_client()
    results = {}
    for numbered in numbering.channels:
        channel = plan.channel(numbered.key)
        task = BuildTask(
            settings=settings,
            channel=channel,
            numbered=numbered,
            earlier=order[: order.index(channel)],
        )
        plex = PlexClient(plex_emulator.url, plex_emulator.token)
        results[channel.name], _ = run_build(
            task,
            SHARED,
            _deps(store, plex),
            llm=client,
            meter=lambda m, u: None,
            exhausted=lambda: False,
        )

    assert results["Drama Movies"].status == "created"
    serious = results["Serious Films"]
    assert serious.status == "skipped"
    assert "another channel of the lineup already plays this" in (serious.reason or "")
    kids = results["Kids Cartoons"]
    assert kids.status == "created", kids.reason
    # preview, refused commit (above the ceiling), corrected commit.
    assert model.worker_calls["Kids Cartoons"] == 3
    assert model.worker_calls["Serious Films"] == 3  # preview, refused commit, give up
    assert kids.envelope is not None
    pool = resolve(kids.envelope, media_items(AiStore(store.engine), synced))
    assert pool and {i.content_rating for i in pool} <= {"G", "TV-Y", "TV-Y7", "TV-G"}
