"""The upload inbox as a resource: the folder lineup files are dropped into, and where they go."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field


class UploadInboxResource(dg.ConfigurableResource):
    """The folder `lineup_upload_sensor` watches, with its `processed/` and `rejected/` folders.

    The three folders are created on first use, so a fresh home needs no setup.

    Examples:
        uploads = UploadInboxResource(path=str(Settings.load().resolved_inbox()))
    """

    path: str = Field(
        description=(
            "The watched folder (`AIRWAVE_INBOX`, default `.airwave/inbox`); lineup files are "
            "taken from directly inside it."
        )
    )

    def folder(self) -> Path:
        """The watched folder (created, along with `processed/` and `rejected/`)."""
        inbox = Path(self.path).expanduser()
        for path in (inbox, inbox / "processed", inbox / "rejected"):
            path.mkdir(parents=True, exist_ok=True)
        return inbox

    def processed(self) -> Path:
        """Where a file moves once its run exists (created)."""
        return self.folder() / "processed"

    def rejected(self) -> Path:
        """Where a file that starts no run moves, with a `<name>.error.txt` beside it (created)."""
        return self.folder() / "rejected"
