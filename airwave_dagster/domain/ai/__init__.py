"""The AI lineup builder's pure domain: profile, shared context, plan, numbers, tools, offline.

Nothing here does I/O or imports dagster, sqlalchemy, plexapi or anthropic; the runtime (ops and
resources) feeds it data and performs its decisions. Reference: docs/reference/ai-lineup.md;
design notes: docs/ai-lineup.md ("Design decisions and quirks fixed").

API (stable; every model is a frozen pydantic model that round-trips through JSON):

- `profile`: `LibraryProfile` (`.render_text()`), `build_profile(items, *, source_id="",
  show_networks=None)`; parts `NameCount`, `DecadeCount`, `ShowSize`, `Distribution`,
  `ProfileTotals`, `ProfileFlags`; `render_profile(profile)`.
- `context`: `VOCABULARY_FIELDS` (tag fields to fetch, in order), `HEAVY_TAG_FIELDS`,
  `CATALOG_EXCLUDED`, `SharedContext` (`text`, `sha256`, `chars`, `approx_tokens`,
  `vocabulary_fields`), `render_shared_context(profile, vocabulary) -> SharedContext`,
  `render_field_catalog(preloaded)`, `render_vocabulary(vocabulary)`, `normalise_vocabulary`.
- `plan`: planner output models `LineupPlan` (`.only(keys)`: the channels a `limit` builds) ▸
  `PlannedPackage` ▸ `PlannedChannel` (with `.filter_node()` / `.envelope()` into
  `filters.FilterNode` / `FilterEnvelope`, and `.exclude_node()`: the optional EXCLUDE
  definition's filter), filter parts
  `PlanCondition`, `PlanGroup`, `PlanInnerGroup`; `plan_input_schema()` (the planner tool's
  `input_schema`); `parse_plan(raw) -> LineupPlan` raising `PlanSchemaError` (`.issues`);
  `sanitize_plan(raw_or_plan, *, existing_package_keys) -> SanitizedPlan` (`.plan`, `.changes`:
  `PlanChange`, `.dropped_channels`: `DroppedChannel`); `ExistingPackage`,
  `render_existing_packages`; helpers `coerce_accent`, `package_slug(name, taken_keys)`,
  `slugify`, `unique_key`, `number_text`, `selects_something(node)`, `condition_problem`,
  `ACCENT_KEYS`.
- `numbering`: `assign_numbers(plan, taken_numbers, *, package_ids, existing_channels) ->
  LineupNumbering` (`.packages`: `NumberedPackage`, `.channels`: `NumberedChannel` with number
  and accent); `ExistingChannel`; `build_order(numbering, limit)` (round-robin under a limit);
  `channel_accent_at(i)`; `AI_NUMBER_BASE`, `PACKAGE_BLOCK_SIZE`.
- `tools`: `TOOL_DEFINITIONS` / `tool_definitions_api()`; `ChannelToolbox` (Protocol:
  `discover_field_values`, `preview_filter`, `commit_channel`, `give_up`); `ToolError`;
  `run_tool(toolbox, name, input, *, rules, default_envelope, check, default_exclude) ->
  ToolResult`; `ToolSession(toolbox, *, planned, rules, check, planned_exclude)` (`.call`,
  `.says`, `.finish ->
  ChannelOutcome`); `ChannelCheck` (`.of(guard, name, *texts)`: the lineup checks of a
  commit); `FilterPreview` (plus `item_keys`, `content_ratings`, never dumped), `ShowSample`,
  `summarise_pool(items, *, detail, library_items)`; `verify_pool(preview, min_items=3,
  min_runtime_hours=10.0) -> list[str]`; `PoolRules`; `CommittedChannel`; `ChannelOutcome`,
  `TraceStep`; `channel_definitions(envelope, exclude)` (INCLUDE, then EXCLUDE); limits
  `MAX_MODEL_CALLS` (24), `MIN_POOL_ITEMS`, `MIN_RUNTIME_HOURS` (the
  output caps per call are the LLM resource's: `resources/llm.py`).
- `prompts`: `PLANNER_SYSTEM_PROMPT`, `WORKER_SYSTEM_PROMPT`, `CONTEXT_HEADING`,
  `render_planner_prompt(context, existing_packages)`, `render_channel_brief(channel)`.
- `lineup_checks`: `LineupGuard` (`.check(keys, ratings, *, audience)`, `.keep`, `.conflicts`),
  `LineupRules` (`max_jaccard` 0.5, `max_containment` 0.9), `audience_of(*texts)`,
  `KIDS_RATINGS`, `FAMILY_RATINGS`, `CEILINGS`, `ceiling_group(audience, present)`,
  `ceiling_exclusion(audience, present)` (the ceiling's EXCLUDE definition),
  `negate(node)`, `is_cut_short(callsign, name)`, `overlap(a, b)`, `rating_counts`.
- `offline`: `offline_plan(profile, vocabulary, existing_packages=()) -> LineupPlan`,
  `build_channel_offline(channel, toolbox, *, rules=None, guard=None) -> ChannelOutcome`,
  `offline_guard()`, `make_callsign(name, token, taken)`, `plan_filter(node)`.
- `curate`: `curate_lineup(plan, items, *, show_networks, rules, guard) -> CuratedLineup`
  (`.plan`, `.removed`, `.unverified`), `lineup_guard_for(earlier, items, ...)`,
  `MemoryToolbox`, `resolve(envelope, items, show_networks, exclude)`, `answerable(node, *,
  networks, exclude)`.
- `quality`: `lineup_quality(library, channels) -> LineupQuality` (`.lines()`),
  `BuiltChannel`, `PairOverlap`, `description_is_true(description, pool)`.
- `usage`: `Usage` (`from_api(usage_dict)`, `+`, `total_input_tokens`), `ModelUsage`,
  `add_usage`, `merge_usage`, `total_usage`, `ModelPrice`, `PriceTable` (`price_of`,
  `with_overrides`), `DEFAULT_PRICES`, `cost_usd(model, usage, table)`, `summarise_cost`,
  `CostSummary`, `remaining_budget`, `budget_exhausted`, `worst_case_call_cost`.
- `report`: `ChannelBuildResult` (`.of(numbered, channel, outcome)`), `PackageSummary`,
  `KeptChannel`, `LineupReport` (`.quality`, `.quality_metadata()`, `.kept_old`),
  `build_report(..., quality=None)`, `measure_built_lineup(items, results,
  show_networks=None)`, `render_markdown(report)`.
"""
