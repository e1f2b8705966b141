"""The `import_lineup` ops: plan the file, create packages, build each channel, summarize.

Each op resolves its inputs, calls the domain or a store, traces, and returns its checkpoint;
the build itself is `ops/lineup_import/channel_build.py`.
"""

import hashlib
from datetime import UTC, datetime

import dagster as dg

from airwave_dagster.domain.errors import AirwaveError
from airwave_dagster.domain.import_plan import plan_import
from airwave_dagster.domain.lineup_file import check_lineup_size, parse_lineup
from ops.lineup_import.channel_build import (
    BuildError,
    BuildStep,
    apply_channel,
    channel_sort,
    filter_definitions,
)
from ops.lineup_import.checkpoints import (
    ChannelResult,
    ChannelTask,
    ImportLineupConfig,
    ImportReport,
    InlineLineupConfig,
    PackagesResult,
    PlannedImport,
    PlexVocabulary,
    channel_status,
    failure_message,
    outcome_table,
)
from ops.steps import claimant, mapping_key, trace_identity, versioned_op
from resources.database import DatabaseResource
from resources.lineup_files import LineupFilesResource
from resources.plex import PlexError, PlexResource

OP_VERSION = "import-v4"
"""Code version of every op of this job; bump it when an op's behaviour or output type changes."""


def _read_lineup(
    config: ImportLineupConfig, lineup_files: LineupFilesResource
) -> tuple[bytes, str]:
    lineup = config.lineup
    if isinstance(lineup, InlineLineupConfig):
        return lineup.content.encode("utf-8"), lineup.name
    name = lineup.path
    path = lineup_files.resolve(lineup.path)
    try:
        # Refuse a huge file by its size, before reading it into memory.
        check_lineup_size(path.stat().st_size, source=name)
        return path.read_bytes(), name
    except AirwaveError as error:
        raise dg.Failure(description=str(error)) from error
    except OSError as error:
        # The path as typed may be relative; say where it was looked for and why there.
        raise dg.Failure(
            f"{name}: cannot read the lineup file ({error.strerror}); tried {path} "
            f"(relative paths are resolved against the airwave home, {lineup_files.base()})"
        ) from error


@versioned_op(OP_VERSION)
def plan_import_lineup(
    context: dg.OpExecutionContext,
    config: ImportLineupConfig,
    database: DatabaseResource,
    plex: PlexResource,
    lineup_files: LineupFilesResource,
) -> PlannedImport:
    """Validate the lineup file completely, then plan the import against the database and Plex.

    The file is `lineup.file.path` (a relative path is read from the airwave home) or
    `lineup.inline.content`; the job's default config dry-runs the bundled example. Nothing is
    written before the file is fully validated: a bad file fails here with every problem listed
    by JSON path. The plan (numbers, packages, duplicates) is this step's stored
    output, so a resumed run reuses it instead of re-planning against a changed database.
    """
    data, name = _read_lineup(config, lineup_files)
    try:
        lineup = parse_lineup(data, source=name)
    except AirwaveError as error:
        raise dg.Failure(description=str(error)) from error
    digest = hashlib.sha256(data).hexdigest()
    store = database.stores().channels
    busy = store.engine_busy()
    if busy is not None:
        raise dg.Failure(description=busy)
    client = plex.get_client()
    try:
        libraries = client.libraries()
    except PlexError as error:
        raise dg.Failure(description=str(error)) from error
    source_id = (
        store.find_source(plex.base_url)
        if config.dry_run
        else store.sync_source(plex.base_url, libraries)
    )
    if store.deployment.attached and source_id is not None:
        # Airwave's planner remaps library keys against its own rows, enabled or not (§5.1).
        libraries = store.source_libraries(source_id)
    state = store.instance_state(libraries)
    plan = plan_import(lineup, state, selected_numbers=config.selected_numbers)
    try:
        # Read the vocabulary every build needs once, here: the builds are given it.
        for channel in plan.creates():
            client.prepare(filter_definitions(channel), sort=channel_sort(channel))
    except PlexError as error:
        raise dg.Failure(description=str(error)) from error
    store.record_trace(
        **trace_identity(context),
        step_name="planImport",
        phase="plan",
        dry_run=config.dry_run,
        status="ok",
        input={"lineup": name, "sha256": digest, "selectedNumbers": config.selected_numbers},
        # Airwave's run page reads these keys (docs/reference/airwave-database.md §3.9).
        output={
            "counts": {
                "toCreate": plan.counts.to_create,
                "skipDuplicate": plan.counts.skip_duplicate,
                "disabled": plan.counts.disabled,
                "reassigned": plan.counts.reassigned,
            },
            "packages": [{"key": p.key, "action": p.action} for p in plan.packages],
            "numbers": [
                {
                    "name": c.name,
                    "from": c.original_number,
                    "to": c.assigned_number,
                    "reassigned": c.number_reassigned,
                }
                for c in plan.creates()
            ],
        },
    )
    for channel in plan.channels:
        if channel.action == "skip-duplicate":
            store.record_trace(
                **trace_identity(context),
                step_name="planImport",
                phase="channel",
                dry_run=config.dry_run,
                status="skipped",
                reason=channel.skip_reason,
                channel_name=channel.name,
                channel_number=channel.original_number,
                package_key=channel.package_key,
            )
    context.add_output_metadata(
        {
            "lineup": name,
            "to_create": plan.counts.to_create,
            "skip_duplicate": plan.counts.skip_duplicate,
            "disabled": plan.counts.disabled,
            "reassigned": plan.counts.reassigned,
            "packages": len(plan.packages),
        }
    )
    return PlannedImport(
        plan=plan,
        lineup_name=name,
        lineup_sha256=digest,
        source_id=source_id,
        dry_run=config.dry_run,
        plex_vocabulary=client.vocabulary(),
    )


@versioned_op(
    OP_VERSION,
    out={
        "packages": dg.Out(PackagesResult),
        "vocabulary": dg.Out(PlexVocabulary),
        "channels": dg.DynamicOut(ChannelTask),
    },
)
def create_packages(
    context: dg.OpExecutionContext,
    planned: PlannedImport,
    database: DatabaseResource,
):
    """Create or reuse the planned packages by key, then fan out one build per channel to create.

    Safe to retry: packages are upserted by their unique key. A dry-run creates nothing and
    reports the packages it would create.
    """
    plan = planned.plan
    store = database.stores().channels
    if planned.dry_run:
        existing = store.package_ids([p.key for p in plan.packages])
        ids: dict[str, str | None] = {p.key: existing.get(p.key) for p in plan.packages}
        result = PackagesResult(
            created=[],
            reused=[p.key for p in plan.packages if p.key in existing],
            would_create=[p.key for p in plan.packages if p.key not in existing],
        )
    else:
        outcome = store.ensure_packages(plan.packages)
        ids = outcome.ids
        result = PackagesResult(
            created=list(outcome.created), reused=list(outcome.reused), would_create=[]
        )
    # One row for the phase, as Airwave writes it: what was created and reused, and each
    # package's action as the plan decided it (a dry-run's would-create counts as created).
    store.record_trace(
        **trace_identity(context),
        step_name="createPackages",
        phase="packages",
        dry_run=planned.dry_run,
        status="ok",
        output={
            "created": len(result.created) + len(result.would_create),
            "reused": len(result.reused),
            "packages": [{"key": p.key, "name": p.name, "action": p.action} for p in plan.packages],
        },
    )
    yield dg.Output(result, output_name="packages")
    yield dg.Output(PlexVocabulary(responses=planned.plex_vocabulary), output_name="vocabulary")
    for channel in plan.creates():
        yield dg.DynamicOutput(
            ChannelTask(
                channel=channel,
                package_id=ids.get(channel.package_key) if channel.package_key else None,
                source_id=planned.source_id,
                dry_run=planned.dry_run,
            ),
            output_name="channels",
            mapping_key=mapping_key(channel.assigned_number),
        )


@versioned_op(
    OP_VERSION,
    retry_policy=dg.RetryPolicy(max_retries=2, delay=1.0, backoff=dg.Backoff.EXPONENTIAL),
)
def build_channel(
    context: dg.OpExecutionContext,
    task: ChannelTask,
    vocabulary: PlexVocabulary,
    database: DatabaseResource,
    plex: PlexResource,
) -> ChannelResult:
    """Resolve the channel's pool through Plex, create it, and lay its first 12-hour schedule.

    The pool is resolved before anything is written, so a Plex failure leaves nothing behind
    and the step is retried. A retry that finds the channel number taken adopts the row only if
    it is the same channel (equal content signature); otherwise the channel is reported failed.
    A dry-run resolves the pool and writes nothing but its trace row. Plex's vocabulary comes
    from the plan step (`vocabulary`), so Plex is asked only for the pool and the items played.
    """
    started = datetime.now(UTC)
    plex.get_client().use_vocabulary(vocabulary.responses)
    planned = task.channel
    stores = database.stores()
    store = stores.channels
    result = ChannelResult.of(planned, status="created", dry_run=task.dry_run)

    def trace(**fields: object) -> None:
        store.record_trace(**trace_identity(context), **fields)

    step = BuildStep(
        claimant=claimant(context), trace=trace, log=context.log.info, warn=context.log.warning
    )
    try:
        apply_channel(step, task, stores, plex, result, started)
    except BuildError as error:
        raise dg.Failure(
            description=failure_message(planned, str(error), context.run_id),
            metadata={"channel": planned.assigned_number, "cause": str(error)},
        ) from error
    except Exception as error:
        # Failed attempts are traced too, so the trace shows every attempt, not only the last.
        trace(
            step_name="buildChannel",
            phase="channel",
            dry_run=task.dry_run,
            status="failed",
            reason="attempt failed; the step will be retried or the run fails",
            channel_name=planned.name,
            channel_number=planned.assigned_number,
            package_key=planned.package_key,
            number_reassigned=planned.number_reassigned,
            error=f"{type(error).__name__}: {error}"[:2000],
            started_at=started,
        )
        if isinstance(error, dg.DagsterError):
            raise
        # A Failure still goes through the retry policy; its description is what the run page
        # shows for the step, so it names the channel and the way to resume, not only a traceback.
        cause = f"{type(error).__name__}: {error}".strip()
        raise dg.Failure(
            description=failure_message(planned, cause[:1000], context.run_id),
            metadata={"channel": planned.assigned_number, "cause": cause[:1000]},
        ) from error
    # Airwave's statuses: an adopted channel is `created` (its reason says it was adopted).
    status: str = result.status
    if result.status == "created" and planned.disabled:
        status = "disabled"
    trace(
        step_name="buildChannel",
        phase="channel",
        dry_run=task.dry_run,
        status=status,
        reason=result.reason,
        channel_name=planned.name,
        channel_number=planned.assigned_number,
        package_key=planned.package_key,
        pool_size=result.pool_size,
        schedule_slots=result.schedule_slots,
        number_reassigned=planned.number_reassigned,
        output=channel_trace_output(result),
        error=result.reason if result.status == "failed" else None,
        started_at=started,
    )
    context.add_output_metadata(
        {
            "number": planned.assigned_number,
            "pool_size": result.pool_size if result.pool_size is not None else -1,
            "schedule_slots": result.schedule_slots or 0,
            "unsupported by Plex": "; ".join(result.unsupported) or "none",
            # The same words as the report's table: a dry-run "would create", it never "created".
            "status": "adopted"
            if result.adopted
            else channel_status(result)
            if status == "created"
            else status,
        }
    )
    return result


@versioned_op(OP_VERSION)
def summarize_import(
    context: dg.OpExecutionContext,
    planned: PlannedImport,
    packages: PackagesResult,
    results: list[ChannelResult],
    database: DatabaseResource,
) -> ImportReport:
    """Collect every channel build into the import report and check nothing is missing.

    Fails loudly if a planned channel has no build result (for example after a crash that a
    plain re-execution did not repair), naming the missing channel numbers.
    """
    plan = planned.plan
    built = {r.number: r for r in results}
    missing = [c.assigned_number for c in plan.creates() if c.assigned_number not in built]
    if missing:
        raise dg.Failure(
            description=(
                f"{len(missing)} planned channel(s) have no build result: "
                f"{', '.join(map(str, missing))}. Finish it with `airwave runs resume "
                f"{context.run_id}` (or Re-execute from failure in the UI), which builds exactly "
                "the missing channels."
            )
        )
    skipped = [
        ChannelResult.of(c, status="skipped", dry_run=planned.dry_run, reason=c.skip_reason)
        for c in plan.channels
        if c.action == "skip-duplicate"
    ]
    channels = [built[c.assigned_number] for c in plan.creates()] + skipped
    report = ImportReport(
        lineup_name=planned.lineup_name,
        dry_run=planned.dry_run,
        # What the packages step found, not what the plan expected: a package created between
        # the plan and the step (or by a crashed attempt) was reused, not created.
        packages_created=len(packages.created) + len(packages.would_create),
        packages_reused=len(packages.reused),
        channels_created=sum(1 for r in results if r.status == "created" and not r.disabled),
        channels_skipped=len(skipped),
        channels_disabled=sum(1 for r in results if r.status == "created" and r.disabled),
        channels_failed=sum(1 for r in results if r.status == "failed"),
        channels_reassigned=sum(1 for r in results if r.number_reassigned),
        channels=channels,
    )
    database.stores().channels.record_trace(
        **trace_identity(context),
        step_name="report",
        phase="report",
        dry_run=planned.dry_run,
        status="ok",
        output={
            "dryRun": report.dry_run,
            "targetSourceId": planned.source_id,
            "packagesCreated": report.packages_created,
            "packagesReused": report.packages_reused,
            "channelsCreated": report.channels_created,
            "channelsSkipped": report.channels_skipped,
            "channelsDisabled": report.channels_disabled,
            "channelsFailed": report.channels_failed,
            "channelsReassigned": report.channels_reassigned,
        },
    )
    context.add_output_metadata(
        {"dry_run": report.dry_run, **report.counts(), "channels": outcome_table(report)}
    )
    return report


def channel_trace_output(result: ChannelResult) -> dict[str, object]:
    """A channel row's `output` as Airwave writes it (camelCase, absent values left out)."""
    output: dict[str, object] = {
        "number": result.number,
        "name": result.name,
        "status": result.status,
        "disabled": result.disabled,
        "dryRun": result.dry_run,
        "numberReassigned": result.number_reassigned,
    }
    optional = {
        "reason": result.reason,
        "channelId": result.channel_id,
        "poolSize": result.pool_size,
        "scheduleSlots": result.schedule_slots,
    }
    output.update({key: value for key, value in optional.items() if value is not None})
    if result.unsupported:
        output["unsupported"] = list(result.unsupported)
    return output
