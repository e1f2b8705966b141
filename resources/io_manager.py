"""Op outputs stored as JSON in PostgreSQL, validated against their declared type when loaded.

The same table holds each run's report: every job of this project ends in a report op whose
output is the run's result, and `stored_report` reads it back for the CLI.
"""

from typing import Any

import dagster as dg
import sqlalchemy as sa
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.dialects.postgresql import insert as pg_insert

from airwave_dagster.run_tags import (
    CODE_VERSION_TAG,
    IMPORT_LINEUP_JOB,
    REPORT_OP_TAG,
    SUMMARIZE_IMPORT_OP,
)
from resources import tables as t
from resources.database import DatabaseResource
from resources.stores.engine import engine_for


def _python_type(dagster_type: dg.DagsterType) -> Any:
    typing_type = dagster_type.typing_type
    return Any if typing_type is None else typing_type


def _type_name(python_type: Any) -> str:
    return getattr(python_type, "__qualname__", None) or repr(python_type)


def _op_code_version(context: dg.OutputContext) -> str | None:
    """The code version tag of the op that produces this output, as the code declares it now."""
    try:
        return context.op_def.tags.get(CODE_VERSION_TAG)
    except Exception:  # an output context without an op definition (e.g. built by hand)
        return None


class PostgresJsonIOManager(dg.ConfigurableIOManager):
    """Keeps every op output as JSON in `airwave.step_output`, never as pickles on local disk.

    Rows are keyed by (run id, step key, output name, mapping key). A re-execution loads the
    outputs of steps it skips from the run that produced them (Dagster hands that run id to
    `load_input`), and every loaded value is validated against the producing op's declared type:
    a stored value that no longer fits is refused with an error naming the step and the field,
    because silently trusting it after a code change could corrupt a resumed run.
    """

    database: dg.ResourceDependency[DatabaseResource]

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        """Store `obj` as JSON under this step output's key (idempotent on retry)."""
        python_type = _python_type(context.dagster_type)
        value = TypeAdapter(python_type).dump_python(obj, mode="json")
        row = {
            "run_id": context.run_id,
            "step_key": context.step_key,
            "output_name": context.name,
            "mapping_key": context.mapping_key or "",
            "type_name": _type_name(python_type),
            "code_version": context.op_def.tags.get(CODE_VERSION_TAG),
            "value": value,
        }
        stmt = pg_insert(t.step_output).values(**row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["run_id", "step_key", "output_name", "mapping_key"],
            set_={
                "value": stmt.excluded.value,
                "type_name": stmt.excluded.type_name,
                "code_version": stmt.excluded.code_version,
            },
        )
        with engine_for(self.database.url).begin() as conn:
            conn.execute(stmt)

    def load_input(self, context: dg.InputContext) -> object:
        """Load the upstream output from the run that produced it and validate it."""
        upstream = context.upstream_output
        if upstream is None:
            raise dg.Failure(f"input {context.name!r} has no upstream output to load")
        key = (upstream.run_id, upstream.step_key, upstream.name, upstream.mapping_key or "")
        with engine_for(self.database.url).connect() as conn:
            row = conn.execute(
                sa.select(t.step_output.c.value, t.step_output.c.code_version).where(
                    t.step_output.c.run_id == key[0],
                    t.step_output.c.step_key == key[1],
                    t.step_output.c.output_name == key[2],
                    t.step_output.c.mapping_key == key[3],
                )
            ).one_or_none()
        where = f"output {upstream.name!r} of step {upstream.step_key!r} (run {upstream.run_id})"
        if row is None:
            raise dg.Failure(f"no stored value for {where}")
        value, stored_version = row
        current_version = _op_code_version(upstream)
        if stored_version != current_version:
            # Backstop of the run coordinator's guard, for launch paths that bypass it: the value
            # was made by different code than the op now declares.
            raise dg.Failure(
                description=(
                    f"the stored {where} was produced by op version {stored_version or '(none)'} "
                    f"but the op is now version {current_version or '(none)'}. Refusing to reuse "
                    "it; start a new run instead of resuming this one."
                )
            )
        python_type = _python_type(upstream.dagster_type)
        try:
            return TypeAdapter(python_type).validate_python(value)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc']) or '<root>'}: {e['msg']}"
                for e in error.errors()[:5]
            )
            raise dg.Failure(
                description=(
                    f"the stored {where} no longer fits {_type_name(python_type)}: {problems}. "
                    "The code changed since that run; start a new run instead of resuming it."
                )
            ) from error


# Runs started before jobs carried `airwave/report_op` still name their report op this way.
_KNOWN_REPORT_OPS = {IMPORT_LINEUP_JOB: SUMMARIZE_IMPORT_OP}


def report_op(run: dg.DagsterRun) -> str | None:
    """The op whose output is the run's report (its job's `airwave/report_op` tag)."""
    return run.tags.get(REPORT_OP_TAG) or _KNOWN_REPORT_OPS.get(run.job_name)


def stored_report(
    instance: dg.DagsterInstance, run_id: str, database_url: str
) -> dict[str, Any] | None:
    """The newest report produced by `run_id` or any run of its group, or None.

    After a resume the report may have been produced by a re-execution, so the whole run group
    is searched and the newest report wins.

    Args:
        instance: The Dagster instance that holds the run.
        run_id: Any run of the group.
        database_url: The project database, where `PostgresJsonIOManager` stored the outputs.

    Returns:
        The report as stored (JSON), or None when the run, its report op or the output is missing.
    """
    run = instance.get_run_by_id(run_id)
    if run is None:
        return None
    op = report_op(run)
    if op is None:
        return None
    group = instance.get_run_group(run_id)
    run_ids = [r.run_id for r in group[1]] if group else [run_id]
    with engine_for(database_url).connect() as conn:
        value = conn.execute(
            sa.select(t.step_output.c.value)
            .where(t.step_output.c.run_id.in_(run_ids), t.step_output.c.step_key == op)
            .order_by(t.step_output.c.created_at.desc())
            .limit(1)
        ).scalar_one_or_none()
    return value if isinstance(value, dict) else None
