"""Where `import_lineup` finds a lineup file that its run config names by a relative path."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field


class LineupFilesResource(dg.ConfigurableResource):
    """The directory a relative `lineup.file.path` of `import_lineup` is resolved against.

    Bound to the airwave home (`AIRWAVE_HOME`) rather than the process's working directory: the
    webserver, the code server and each run worker may each start somewhere else, while the home
    is one documented directory in every deployment (`/data/home` in the image).

    Examples:
        lineup_files = LineupFilesResource(directory=str(Settings.load().resolved_home()))
    """

    directory: str = Field(
        description="Relative lineup paths resolve against this directory (the airwave home)."
    )

    def base(self) -> Path:
        """The directory relative paths are resolved against, as an absolute path."""
        return Path(self.directory).expanduser().absolute()

    def resolve(self, path: str) -> Path:
        """`path` made absolute: unchanged when it already is, else taken under `base()`."""
        given = Path(path).expanduser()
        return given if given.is_absolute() else self.base() / given
