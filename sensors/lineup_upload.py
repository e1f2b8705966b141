"""`lineup_upload_sensor`: every lineup file dropped into the inbox becomes one import run.

The inbox is the `uploads` resource (`UploadInboxResource`; `definitions.py` binds it to
`$AIRWAVE_INBOX`, default `.airwave/inbox`). `build_lineup_upload_sensor(job)` makes the sensor
for the import job it is given, so this module never imports `ops`. Each tick looks at the
regular `*.json` files directly in it:

- a file still being written is left alone: it must have kept the same size and modification
  time since the previous tick and be at least `SETTLE_SECONDS` old;
- symlinks, hidden files and anything not directly in the inbox are ignored;
- a file over 10 MB, or one that fails validation, starts no run: it moves to `rejected/` with a
  `<name>.error.txt` beside it that says why (every problem, with its JSON path);
- a valid file requests an `import_lineup` run whose run key is the SHA-256 of its content, so
  the same content uploaded twice gives one run (the daemon drops a repeated run key); once the
  run exists the file moves to `processed/`.

Nothing is lost when the daemon stops between ticks: the cursor remembers which requested runs
still have to be confirmed before their files move.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from airwave_dagster import tracing
from airwave_dagster.domain.errors import AirwaveError
from airwave_dagster.domain.lineup_file import MAX_LINEUP_BYTES, parse_lineup
from airwave_dagster.run_tags import (
    DRY_RUN_TAG,
    IDEMPOTENCY_TAG,
    LINEUP_SHA256_TAG,
    LINEUP_TAG,
    PLAN_IMPORT_OP,
    import_key_of_digest,
)
from resources.uploads import UploadInboxResource

SETTLE_SECONDS = 2.0
"""A file younger than this may still be growing; it waits for a later tick."""
RUN_KEY_TAG = "dagster/run_key"

LINEUP_INBOX = dg.AssetSpec(
    "lineup_inbox",
    description=(
        "The upload inbox ($AIRWAVE_INBOX). lineup_upload_sensor records an observation for every "
        "file it takes: the file, its outcome (rejected, or run requested) and, for a rejection, "
        "the reason and where the file went. `airwave inbox` lists the same."
    ),
    group_name="uploads",
)
"""The asset whose observations are the inbox's history, shown in the asset catalog."""


def _observation(name: str, outcome: str, **details: str) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=LINEUP_INBOX.key,
        description=f"{name}: {outcome}",
        metadata={"file": name, "outcome": outcome, **details},
    )


@dataclass
class InboxCursor:
    """What the sensor remembers between ticks."""

    seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    """File name → (size, mtime_ns) at the previous tick, to recognise a file still growing."""
    pending: dict[str, str] = field(default_factory=dict)
    """File name → content SHA-256 of requested runs whose files have not moved yet."""

    @classmethod
    def load(cls, raw: str | None) -> InboxCursor:
        """Parse a stored cursor; an unreadable one starts afresh (files are re-examined)."""
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
            return cls(
                seen={k: (int(v[0]), int(v[1])) for k, v in data.get("seen", {}).items()},
                pending={str(k): str(v) for k, v in data.get("pending", {}).items()},
            )
        except (ValueError, TypeError, KeyError, IndexError):
            return cls()

    def dump(self) -> str:
        """The cursor as stored by Dagster."""
        return json.dumps(
            {"seen": {k: list(v) for k, v in self.seen.items()}, "pending": self.pending},
            sort_keys=True,
        )


def _move(path: Path, folder: Path, digest: str | None) -> Path:
    """Move `path` into `folder`, never overwriting an earlier file of the same name."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    prefix = digest[:12] if digest else stamp
    target = folder / f"{prefix}-{path.name}"
    counter = 1
    while target.exists():
        target = folder / f"{prefix}-{counter}-{path.name}"
        counter += 1
    shutil.move(str(path), target)
    return target


def _one_line(error: Exception, limit: int = 400) -> str:
    """An error's message on one line, short enough for a tick's skip reason."""
    return _one_line_text(str(error), limit) or type(error).__name__


def _one_line_text(text: str, limit: int = 400) -> str:
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _reject(path: Path, rejected: Path, reason: str) -> Path:
    target = _move(path, rejected, None)
    target.with_name(target.name + ".error.txt").write_text(reason + "\n", encoding="utf-8")
    return target


def _candidates(inbox: Path) -> list[Path]:
    """Regular, visible `*.json` files directly in the inbox (symlinks are never followed)."""
    files = []
    for entry in sorted(inbox.iterdir()):
        if entry.name.startswith(".") or entry.suffix.lower() != ".json":
            continue
        if entry.is_symlink() or not entry.is_file():
            continue
        if entry.resolve().parent != inbox.resolve():
            continue
        files.append(entry)
    return files


def _run_exists(instance: dg.DagsterInstance, digest: str) -> bool:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: digest}), limit=1)
    return bool(runs)


def evaluate_inbox(
    context: dg.SensorEvaluationContext,
    uploads: UploadInboxResource,
    *,
    now: float | None = None,
) -> dg.SensorResult:
    """One tick over the inbox (the sensor body, separated so tests can set the clock)."""
    inbox, processed, rejected = uploads.folder(), uploads.processed(), uploads.rejected()
    cursor = InboxCursor.load(context.cursor)
    now = time.time() if now is None else now
    notes: list[str] = []
    observations: list[dg.AssetObservation] = []

    def rejected_because(path: Path, reason: str, note: str) -> None:
        # Seen wherever a person looks: the tick's log, the asset catalog (`lineup_inbox`), the
        # tick's skip reason when nothing else happened, and `airwave inbox`.
        target = _reject(path, rejected, reason)
        context.log.warning(f"{path.name}: rejected, moved to {target}: {_one_line_text(reason)}")
        observations.append(
            _observation(
                path.name, "rejected", reason=_one_line_text(reason, 2000), moved_to=str(target)
            )
        )
        notes.append(note)

    # Files whose run was requested on an earlier tick move once the run exists.
    for name, digest in list(cursor.pending.items()):
        path = inbox / name
        if not path.exists():
            del cursor.pending[name]
        elif _run_exists(context.instance, digest):
            _move(path, processed, digest)
            del cursor.pending[name]
            notes.append(f"{name}: run created, moved to processed/")

    requests: list[dg.RunRequest] = []
    requested: set[str] = set()
    seen: dict[str, tuple[int, int]] = {}
    for path in _candidates(inbox):
        if path.name in cursor.pending:
            continue
        stat = path.stat()
        if stat.st_size > MAX_LINEUP_BYTES:
            rejected_because(
                path,
                f"{path.name}: the file is {stat.st_size:,} bytes; lineup files are limited to "
                f"{MAX_LINEUP_BYTES:,} bytes (10 MB)",
                f"{path.name}: rejected (too large)",
            )
            continue
        signature = (stat.st_size, stat.st_mtime_ns)
        if cursor.seen.get(path.name) != signature or now - stat.st_mtime < SETTLE_SECONDS:
            seen[path.name] = signature  # new or still changing: look again next tick
            continue
        content = path.read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        try:
            parse_lineup(content, source=path.name)
        except AirwaveError as error:
            rejected_because(
                path,
                str(error),
                f"{path.name}: rejected (invalid), moved to rejected/: {_one_line(error)}",
            )
            continue
        if _run_exists(context.instance, digest):
            _move(path, processed, digest)
            notes.append(f"{path.name}: same content as an earlier upload; its run exists")
            continue
        cursor.pending[path.name] = digest
        if digest in requested:
            continue  # the same content twice in one tick: one run, both files move with it
        requested.add(digest)
        observations.append(_observation(path.name, "run requested", sha256=digest))
        # The upload is the start of the run's story: a span of its own, recorded on the run.
        with tracing.starting(
            "start import_lineup", {"airwave.upload": path.name}, from_environment=False
        ) as traced:
            pass
        requests.append(
            dg.RunRequest(
                run_key=digest,
                run_config={
                    "ops": {
                        PLAN_IMPORT_OP: {
                            "config": {
                                "lineup": {
                                    "inline": {
                                        "content": content.decode("utf-8"),
                                        "name": path.name,
                                    }
                                },
                                # Said outright: the job's default config is a dry-run.
                                "dry_run": False,
                            }
                        }
                    }
                },
                tags={
                    LINEUP_TAG: path.name,
                    DRY_RUN_TAG: "false",
                    LINEUP_SHA256_TAG: digest,
                    IDEMPOTENCY_TAG: import_key_of_digest(digest),
                    **traced,
                },
            )
        )
    cursor.seen = seen
    if requests:
        return dg.SensorResult(
            run_requests=requests, asset_events=observations, cursor=cursor.dump()
        )
    reason = "; ".join(notes) if notes else "no new lineup files"
    return dg.SensorResult(
        skip_reason=dg.SkipReason(reason), asset_events=observations, cursor=cursor.dump()
    )


def build_lineup_upload_sensor(job: dg.JobDefinition) -> dg.SensorDefinition:
    """The sensor that starts a run of `job` (the import) for each file dropped into the inbox.

    Args:
        job: The `import_lineup` job; its first op takes the file as run config.

    Returns:
        `lineup_upload_sensor`, running by default, reading its folder from the `uploads`
        resource.
    """

    @dg.sensor(
        job=job,
        minimum_interval_seconds=5,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Starts an import_lineup run for each lineup file dropped into $AIRWAVE_INBOX "
            "(default .airwave/inbox); invalid files move to rejected/ with the reason."
        ),
    )
    def lineup_upload_sensor(
        context: dg.SensorEvaluationContext, uploads: UploadInboxResource
    ) -> dg.SensorResult:
        """Watch the inbox (see the module docstring)."""
        return evaluate_inbox(context, uploads)

    return lineup_upload_sensor
