"""The `import_lineup` job's run config and checkpoints (every op output, stored as JSON).

A stored checkpoint is loaded back into these models on a resume, so a change to a model's shape
is a change of the job's code version (`OP_VERSION` in `ops/lineup_import/ops.py`).
"""

from typing import Literal

import dagster as dg
from pydantic import BaseModel, Field

from airwave_dagster.domain.import_plan import ImportPlan, PlannedChannel


class LineupFileConfig(dg.Config):
    """A lineup file read from disk by the step that plans the import."""

    source: Literal["file"] = "file"
    path: str = Field(
        description=(
            "Path of the lineup file (v1 JSON) on the machine that runs the job. A relative "
            "path is resolved against the airwave home (`AIRWAVE_HOME`, see docs/importer.md)."
        ),
    )


class InlineLineupConfig(dg.Config):
    """A lineup file's content carried in the run config itself."""

    source: Literal["inline"] = "inline"
    content: str = Field(description="The lineup file's content (v1 JSON).")
    name: str = Field(
        default="<inline lineup>",
        description="Name shown in messages and the report (e.g. the uploaded file's name).",
    )


class ImportLineupConfig(dg.Config):
    """What to import and how."""

    # A discriminated union of Config classes is a Dagster Selector: the run config names exactly
    # one of `file` and `inline`, and a config naming neither or both is refused at launch.
    lineup: LineupFileConfig | InlineLineupConfig = Field(
        discriminator="source",
        description="The lineup to import: `file: {path: ...}` or `inline: {content: ...}`.",
    )
    dry_run: bool = Field(
        default=False,
        description="Plan and resolve every pool against Plex, write trace rows, change nothing.",
    )
    selected_numbers: list[int] | None = Field(
        default=None,
        description="Only import the file's channels with these numbers (unset = all).",
    )


class PlannedImport(BaseModel):
    """The plan step's checkpoint: a resumed run reuses it verbatim instead of re-planning."""

    plan: ImportPlan
    lineup_name: str
    lineup_sha256: str
    source_id: str | None
    dry_run: bool
    plex_vocabulary: dict[str, str] = Field(
        default_factory=dict,
        description="What the plan step read of Plex's vocabulary (`PlexClient.vocabulary()`).",
    )


class PlexVocabulary(BaseModel):
    """The run's Plex vocabulary, read once by the plan step and given to every build step.

    Sections, filter fields, sorts and filter choices, as `PlexClient.vocabulary()` holds them:
    a build step answers those reads from here and asks Plex only for its searches and items.
    """

    responses: dict[str, str]


class ChannelTask(BaseModel):
    """One mapped build: a planned channel plus what it needs from earlier steps."""

    channel: PlannedChannel
    package_id: str | None
    source_id: str | None
    dry_run: bool


class PackagesResult(BaseModel):
    """Outcome of the packages step."""

    created: list[str]
    reused: list[str]
    would_create: list[str]


class ChannelResult(BaseModel):
    """Outcome of one channel of the plan (built, skipped as duplicate, or failed)."""

    number: int
    original_number: int
    name: str
    package_key: str | None
    status: Literal["created", "skipped", "failed"]
    disabled: bool = False
    dry_run: bool = False
    reason: str | None = None
    channel_id: str | None = None
    pool_size: int | None = None
    schedule_slots: int | None = None
    number_reassigned: bool = False
    renumber_reason: str | None = Field(
        default=None, description="Why the channel did not keep its file number."
    )
    adopted: bool = Field(
        default=False, description="Built by an earlier attempt of this channel and adopted."
    )
    unsupported: list[str] = Field(
        default_factory=list,
        description="Filter fields and sorts this channel uses that the Plex server lacks.",
    )

    @classmethod
    def of(
        cls,
        channel: PlannedChannel,
        *,
        status: Literal["created", "skipped", "failed"],
        dry_run: bool,
        reason: str | None = None,
    ) -> "ChannelResult":
        """The outcome of a planned channel, before any build detail is known."""
        return cls(
            number=channel.assigned_number,
            original_number=channel.original_number,
            name=channel.name,
            package_key=channel.package_key,
            status=status,
            disabled=channel.disabled,
            dry_run=dry_run,
            reason=reason,
            number_reassigned=channel.number_reassigned,
            renumber_reason=channel.renumber_reason,
        )


class ImportReport(BaseModel):
    """What the import did (or, for a dry-run, would do)."""

    lineup_name: str
    dry_run: bool
    packages_created: int
    packages_reused: int
    channels_created: int
    channels_skipped: int
    channels_disabled: int
    channels_failed: int
    channels_reassigned: int
    channels: list[ChannelResult]

    def counts(self) -> dict[str, int]:
        """The report's counts, named for what they are (a dry-run created nothing)."""
        verb = "to_create" if self.dry_run else "created"
        return {
            f"packages_{verb}": self.packages_created,
            "packages_reused": self.packages_reused,
            f"channels_{verb}": self.channels_created,
            "channels_skipped": self.channels_skipped,
            f"channels_disabled{'_to_create' if self.dry_run else ''}": self.channels_disabled,
            "channels_failed": self.channels_failed,
            "channels_renumbered": self.channels_reassigned,
        }


OUTCOME_COLUMNS = ("number", "channel", "package", "status", "pool", "slots", "note")
"""The per-channel outcome table, as the UI (table metadata) and the CLI (rich table) show it."""


def channel_status(channel: ChannelResult) -> str:
    """A channel's status in words: "would create" in a dry-run, "disabled" when created so."""
    if channel.status != "created":
        return channel.status
    if channel.dry_run:
        return "would create" + (" (disabled)" if channel.disabled else "")
    return "created (disabled)" if channel.disabled else "created"


def failure_message(channel: PlannedChannel, cause: str, run_id: str) -> str:
    """What a failed build tells the operator: which channel, why, and how to finish the run."""
    package = f" in package {channel.package_key}" if channel.package_key else ""
    return (
        f'channel {channel.assigned_number} "{channel.name}"{package} failed: {cause}. '
        f"Channels already built are kept; finish the run with `airwave runs resume {run_id}` "
        "(or Re-execute > From failure in the UI), which builds only what is missing."
    )


def note(channel: ChannelResult) -> str:
    """The outcome table's note: why the number changed, then the build's own reason."""
    renumbered = channel.renumber_reason or (
        "renumbered: the file's number was not free" if channel.number_reassigned else None
    )
    return "; ".join(part for part in (renumbered, channel.reason) if part)


def outcome_rows(report: ImportReport) -> list[dict[str, str | int | None]]:
    """One row per channel of the report, by number, with `OUTCOME_COLUMNS` as keys."""
    rows: list[dict[str, str | int | None]] = []
    for c in sorted(report.channels, key=lambda c: c.number):
        number = str(c.number) + (f" (was {c.original_number})" if c.number_reassigned else "")
        rows.append(
            {
                "number": number,
                "channel": c.name,
                "package": c.package_key or "",
                "status": channel_status(c),
                "pool": c.pool_size,
                "slots": c.schedule_slots,
                "note": note(c),
            }
        )
    return rows


def outcome_table(report: ImportReport) -> dg.TableMetadataValue:
    """The per-channel outcome as Dagster table metadata (the run page shows it as a table)."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("number", "string", description="channel number (was: the file's)"),
            dg.TableColumn("channel", "string"),
            dg.TableColumn("package", "string"),
            dg.TableColumn("status", "string"),
            dg.TableColumn("pool", "int", description="items in the resolved pool"),
            dg.TableColumn("slots", "int", description="schedule slots laid"),
            dg.TableColumn("note", "string"),
        ]
    )
    records = [dg.TableRecord(row) for row in outcome_rows(report)]
    return dg.MetadataValue.table(records=records, schema=schema)
