"""The shared lineup checks on the Anthropic path: a scripted model through the stub (issue 10).

The real anthropic SDK talks to the local stub; the script plays a worker that proposes what
the plan says and reacts to refusals the way a model would: it gives up on a channel the commit
says repeats another one, and, when the commit says a kids channel is above its rating ceiling,
commits the same filter again with the EXCLUDE definition the refusal names. Each build is
judged against the channels planned before it (as the job hands them over); the kids channel's
stored definitions are resolved again through Plex.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.domain.ai.curate import resolve
from airwave_dagster.domain.ai.lineup_checks import ceiling_exclusion
from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.plan import sanitize_plan
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.ai.usage import PriceTable
from ops.ai_lineup.channel_build import run_build
from ops.ai_lineup.checkpoints import BuildTask, LineupSettings
from resources import tables as t
from resources.llm import LlmResource
from resources.plex import PlexClient
from resources.stores.ai import AiStore, media_items
from tests.fakes.scripted_model import ScriptedModel, brief_of, channel_name, genre_channel
from tests.ops.test_channel_build import SHARED, _deps
from tests.support.ai import STUB_KEY_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.plex]

KIDS = ("G", "TV-Y", "TV-Y7", "TV-G")


def _refusal(body: dict[str, Any]) -> str:
    """The text of the tool results in the request's last message (a refused commit's reasons)."""
    messages = body["messages"]
    last = messages[-1]["content"] if len(messages) > 1 else []
    return " ".join(
        block.get("content", "") if isinstance(block.get("content"), str) else ""
        for block in last
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


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

    def __init__(self, plan: dict[str, Any]) -> None:
        super().__init__(plan)
        self.refusals: dict[str, list[str]] = {}

    def worker_reply(self, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        refusal = _refusal(body)
        if "commit refused" in refusal:
            with self.lock:
                self.refusals.setdefault(channel_name(body), []).append(refusal)
        if "repeats channel" in refusal:
            return {
                "kind": "tool_use",
                "name": "give_up",
                "input": {"reason": "another channel of the lineup already plays this"},
            }
        if "above that ceiling" in refusal:
            # The error is JSON text whose message ends "pass exclude={...} with it".
            message = json.loads(refusal)["error"]
            exclude = json.loads(message.split("pass exclude=", 1)[1].split(" with it", 1)[0])
            proposed = json.loads(brief_of(body).split("PROPOSED FILTER (verify it first):\n")[1])
            return {
                "kind": "tool_use",
                "name": "commit_channel",
                "input": {"mediaTypes": ["movie", "show"], "filter": proposed, "exclude": exclude},
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
    assert "Drama Movies" not in model.refusals
    # The shared overlap check refused the repeat, naming the channel it repeats.
    serious = results["Serious Films"]
    assert serious.status == "skipped" and serious.channel_id is None
    assert "another channel of the lineup already plays this" in (serious.reason or "")
    [overlap] = model.refusals["Serious Films"]
    assert "repeats channel 'Drama Movies'" in overlap
    assert model.worker_calls["Serious Films"] == 3  # preview, refused commit, give up
    # The shared audience check refused the kids channel and named the EXCLUDE definition.
    kids = results["Kids Cartoons"]
    [audience] = model.refusals["Kids Cartoons"]
    assert "a kids channel may only carry" in audience and "EXCLUDE definition" in audience
    assert "repeats channel" not in audience
    assert kids.status == "created", kids.reason
    assert model.worker_calls["Kids Cartoons"] == 3  # preview, refused commit, commit again
    assert kids.envelope is not None and kids.exclude == ceiling_exclusion("kids")
    # Stored as two definitions: the planned filter INCLUDEd, the ceiling EXCLUDEd after it.
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(t.channel_definition)
            .where(t.channel_definition.c.channel_id == kids.channel_id)
            .order_by(t.channel_definition.c.sort_index)
        ).all()
    assert [(r.kind, r.mode, r.sort_index) for r in rows] == [
        ("PREDICATE", "INCLUDE", 0),
        ("PREDICATE", "EXCLUDE", 1),
    ]
    assert (
        rows[0].plex_filter["filter"]
        == kids.envelope.model_dump(mode="json", exclude_none=True)["filter"]
    )
    # Plex resolves the stored definitions to the verified pool, all under the ceiling; the
    # filter alone is above it (the exclusion is what keeps the channel right).
    plex = PlexClient(plex_emulator.url, plex_emulator.token)
    pool = plex.resolve_pool([(r.mode, r.plex_filter, None) for r in rows], sort="titleSort")
    assert len(pool) == kids.pool_items and {i.content_rating for i in pool} <= set(KIDS)
    included = resolve(kids.envelope, media_items(AiStore(store.engine), synced))
    assert {i.content_rating for i in included} - set(KIDS)
