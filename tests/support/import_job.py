"""The code location's `import_lineup` with some resources replaced, bound as the location binds."""

from __future__ import annotations

import dagster as dg

from airwave_dagster.definitions import build_definitions, production_resources
from airwave_dagster.run_tags import IMPORT_LINEUP_JOB


def import_job_with(**resources: object) -> dg.JobDefinition:
    """`import_lineup` with `resources` in place of the production ones of the same keys.

    Use it instead of `execute_in_process(resources=...)`: that keeps the default run config
    built for the production resources, and their values then configure the replacements
    (docs/dagster-notes.md Q9). Binding through `Definitions` builds it again for these.
    """
    bound = build_definitions({**production_resources(), **resources})
    return bound.resolve_job_def(IMPORT_LINEUP_JOB)
