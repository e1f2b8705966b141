"""The Postgres JSON IO manager: round trips, refuses values that no longer fit, keeps no files."""

from __future__ import annotations

import dagster as dg
import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from resources import tables as t
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager

pytestmark = pytest.mark.postgres


class Payload(BaseModel):
    number: int
    names: list[str]


@dg.op(tags={"airwave/code_version": "test-v1"})
def build_channel() -> Payload:
    return Payload(number=0, names=[])


def _manager(url: str) -> PostgresJsonIOManager:
    return PostgresJsonIOManager(database=DatabaseResource(url=url))


def _output(run_id: str, mapping_key: str | None = None) -> dg.OutputContext:
    return dg.build_output_context(
        run_id=run_id,
        step_key="build_channel",
        name="result",
        mapping_key=mapping_key,
        op_def=build_channel,
        dagster_type=dg.DagsterType(
            type_check_fn=lambda _, __: True, name="Payload", typing_type=Payload
        ),
    )


def test_round_trip_per_run_and_mapping_key(clean_db: str) -> None:
    manager = _manager(clean_db)
    for run_id, key, number in (("run-a", "ch_1", 1), ("run-a", "ch_2", 2), ("run-b", "ch_1", 3)):
        manager.handle_output(_output(run_id, key), Payload(number=number, names=["x"]))

    loaded = manager.load_input(dg.build_input_context(upstream_output=_output("run-a", "ch_2")))

    assert loaded == Payload(number=2, names=["x"])
    engine = sa.create_engine(clean_db, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        stored = conn.execute(
            sa.select(
                t.step_output.c.value, t.step_output.c.type_name, t.step_output.c.code_version
            ).where(t.step_output.c.run_id == "run-b")
        ).one()
    engine.dispose()
    assert stored.value == {"number": 3, "names": ["x"]}
    assert stored.type_name == "Payload"
    assert stored.code_version == "test-v1"


def test_a_stored_value_that_no_longer_fits_is_refused(clean_db: str) -> None:
    manager = _manager(clean_db)
    manager.handle_output(_output("run-c"), Payload(number=1, names=[]))
    engine = sa.create_engine(clean_db, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(
            t.step_output.update()
            .where(t.step_output.c.run_id == "run-c")
            .values(value={"number": "not a number", "names": []})
        )
    engine.dispose()

    with pytest.raises(dg.Failure) as refused:
        manager.load_input(dg.build_input_context(upstream_output=_output("run-c")))

    message = refused.value.description or ""
    assert "build_channel" in message
    assert "number" in message
    assert "start a new run" in message


def test_missing_output_is_a_clear_failure(clean_db: str) -> None:
    with pytest.raises(dg.Failure, match="no stored value"):
        _manager(clean_db).load_input(dg.build_input_context(upstream_output=_output("nope")))
