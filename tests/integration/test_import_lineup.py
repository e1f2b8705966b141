"""The `import_lineup` job end to end: Dagster's multiprocess executor, Postgres, real plexapi.

Trace payloads follow docs/reference/airwave-database.md §3.9.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.data import DEMO_LINEUP
from airwave_dagster.definitions import import_lineup_job
from airwave_dagster.domain.lineup_file import parse_lineup
from resources import tables as t
from resources.lineup_files import LineupFilesResource
from tests.support import lineups
from tests.support.channels import import_report
from tests.support.import_job import import_job_with

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]

SPEC_EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "lineups" / "spec_example.json"


def _config(path: Path, *, dry_run: bool = False, selected: list[int] | None = None) -> dict:
    config: dict[str, Any] = {"lineup": {"file": {"path": str(path)}}, "dry_run": dry_run}
    if selected is not None:
        config["selected_numbers"] = selected
    return {"ops": {"plan_import_lineup": {"config": config}}}


def _run(instance: dg.DagsterInstance, run_config: dict) -> tuple[bool, str]:
    with dg.execute_job(
        dg.reconstructable(import_lineup_job), instance=instance, run_config=run_config
    ) as result:
        return result.success, result.run_id


def _report(store, run_id: str) -> dict[str, Any]:
    return import_report(store, run_id)


def _app_counts(store) -> dict[str, int]:
    counts = store.counts()
    counts.pop("import_traces")
    return counts


def _database_untouched(store) -> bool:
    with store.engine.connect() as conn:
        sources = conn.execute(sa.select(sa.func.count()).select_from(t.media_source))
        return sources.scalar_one() == 0 and sum(store.counts().values()) == 0


def _plan_failure(instance, run_config: dict, **resources: Any) -> str:
    result = import_job_with(**resources).execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False
    )
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert [e.step_key for e in failures] == ["plan_import_lineup"]
    return failures[0].step_failure_data.user_failure_data.description


@pytest.fixture
def env(store, plex_emulator, dagster_instance):
    return store, plex_emulator, dagster_instance


def test_dry_run_resolves_pools_and_writes_nothing(env, tmp_path: Path) -> None:
    store, emulator, instance = env
    path = lineups.write(tmp_path, lineups.genre_lineup(6))

    ok, run_id = _run(instance, _config(path, dry_run=True))

    assert ok
    assert _app_counts(store) == {
        "packages": 0,
        "channels": 0,
        "definitions": 0,
        "schedule_items": 0,
        "media_items": 0,
        "snapshot_items": 0,
    }
    report = _report(store, run_id)
    assert report["dry_run"] is True
    assert report["packages_created"] == 1
    assert [c["status"] for c in report["channels"]] == ["created"] * 6
    library = emulator.library.media_items()
    for i, result in enumerate(sorted(report["channels"], key=lambda c: c["number"])):
        genre = lineups.GENRES[i % len(lineups.GENRES)]
        expected = [m for m in library if genre in m.genres and (m.year or 0) >= 1930 + i]
        assert result["pool_size"] == len(expected) > 0


def test_the_default_config_dry_runs_the_bundled_example(env) -> None:
    store, _, instance = env
    demo = parse_lineup(DEMO_LINEUP.read_bytes(), source=DEMO_LINEUP.name)

    # No run config at all: what the Launchpad launches when its default is left as it opens.
    ok, run_id = _run(instance, {})

    assert ok
    report = _report(store, run_id)
    assert report["dry_run"] is True
    assert report["lineup_name"] == str(DEMO_LINEUP)
    assert len(report["channels"]) == len(demo.channels)
    assert report["channels_failed"] == 0
    assert sum(_app_counts(store).values()) == 0, "a dry-run writes trace rows only"
    assert any(r["phase"] == "report" for r in store.traces(run_id))


def test_a_relative_path_is_read_from_the_home_and_a_missing_one_says_where(
    env, tmp_path: Path
) -> None:
    store, _, instance = env
    home = tmp_path / "home"
    (home / "lineups").mkdir(parents=True)
    lineups.write(home / "lineups", lineups.genre_lineup(2), "friday.json")
    files = LineupFilesResource(directory=str(home))

    found = import_job_with(lineup_files=files).execute_in_process(
        run_config=_config(Path("lineups/friday.json"), dry_run=True), instance=instance
    )
    message = _plan_failure(
        instance, _config(Path("lineups/monday.json"), dry_run=True), lineup_files=files
    )

    assert found.success
    assert _report(store, found.run_id)["lineup_name"] == "lineups/friday.json"
    assert message.startswith("lineups/monday.json: cannot read the lineup file (")
    assert f"tried {home / 'lineups' / 'monday.json'} " in message
    assert f"resolved against the airwave home, {home})" in message


def test_import_creates_what_the_plan_says_and_reimport_is_a_no_op(env, tmp_path: Path) -> None:
    store, _, instance = env
    path = lineups.write(tmp_path, lineups.genre_lineup(5))

    ok, run_id = _run(instance, _config(path))

    assert ok
    report = _report(store, run_id)
    assert report["channels_created"] == 5
    # One `packages` row per run, as Airwave's run page reads it (§3.9).
    package_rows = [
        (r["status"], r["attempt"], r["step_key"], r["output"])
        for r in store.traces(run_id)
        if r["phase"] == "packages"
    ]
    created = {"key": "genres", "name": "Genres", "action": "create"}
    assert package_rows == [
        ("ok", 1, "create_packages", {"created": 1, "reused": 0, "packages": [created]})
    ]
    with store.engine.connect() as conn:
        numbers = conn.execute(sa.select(t.channel.c.number).order_by(t.channel.c.number))
        assert list(numbers.scalars()) == [100, 101, 102, 103, 104]
        spans = conn.execute(
            sa.select(
                t.schedule_item.c.channel_id,
                sa.func.min(t.schedule_item.c.starts_at),
                sa.func.max(
                    t.schedule_item.c.starts_at
                    + sa.func.make_interval(0, 0, 0, 0, 0, 0, t.schedule_item.c.duration_seconds)
                ),
            ).group_by(t.schedule_item.c.channel_id)
        ).all()
    assert len(spans) == 5
    for _, start, end in spans:
        assert end - start >= timedelta(hours=12)
    # Step outputs live in Postgres (JSON), compute logs are off: nothing lands on local disk.
    local = Path(instance.storage_directory())
    files = [p for p in local.rglob("*") if p.is_file()] if local.exists() else []
    assert files == []
    first = _app_counts(store)

    ok, run_id = _run(instance, _config(path))

    assert ok
    report = _report(store, run_id)
    assert report["channels_created"] == 0
    assert report["channels_skipped"] == 5
    assert report["packages_created"] == 0
    assert _app_counts(store) == first


def test_collisions_are_renumbered_by_the_two_pass_rule(env, tmp_path: Path) -> None:
    store, _, instance = env
    existing = lineups.lineup(
        [
            lineups.channel(101, "Existing A", [lineups.predicate(["movie"], None)]),
            lineups.channel(104, "Existing B", [lineups.predicate(["show"], None)]),
        ]
    )
    assert _run(instance, _config(lineups.write(tmp_path, existing, "existing.json")))[0]
    drama = lineups.condition("genre", "is", "Drama")
    colliding = lineups.lineup(
        [
            lineups.channel(101, "New 101", [lineups.predicate(["movie"], drama)]),
            lineups.channel(102, "New 102", [lineups.predicate(["show"], drama)]),
            lineups.channel(103, "New 103", [lineups.predicate(["movie", "show"], drama)]),
            lineups.channel(101, "Second 101", [lineups.predicate(["movie"], None)]),
        ]
    )

    ok, run_id = _run(instance, _config(lineups.write(tmp_path, colliding, "new.json")))

    assert ok
    assigned = {c["name"]: c["number"] for c in _report(store, run_id)["channels"]}
    assert assigned == {"New 101": 105, "New 102": 102, "New 103": 103, "Second 101": 106}


def test_channel_builds_overlap_but_never_more_than_four(env, tmp_path: Path) -> None:
    store, _, instance = env
    path = lineups.write(tmp_path, lineups.genre_lineup(10))

    ok, run_id = _run(instance, _config(path, dry_run=True))

    assert ok
    builds = [r for r in store.traces(run_id) if r["step_name"] == "buildChannel"]
    assert len(builds) == 10
    edges = sorted(
        [(r["started_at"], 1) for r in builds] + [(r["finished_at"], -1) for r in builds],
        key=lambda e: (e[0], e[1]),
    )
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    assert 2 <= peak <= 4


def test_bad_file_fails_in_the_plan_step_and_changes_nothing(env, tmp_path: Path) -> None:
    store, _, instance = env
    data = lineups.genre_lineup(2)
    data["channels"][1]["definitions"][0]["plexFilter"]["filter"]["children"][0]["field"] = "genra"
    path = lineups.write(tmp_path, data, "typo.json")

    message = _plan_failure(instance, _config(path))

    assert "typo.json" in message
    assert "$.channels[1].definitions[0].plexFilter.filter.children[0].field" in message
    assert "genra" in message
    assert _database_untouched(store)


INVALID = sorted((SPEC_EXAMPLE.parent / "invalid").glob("*.json"))


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_every_refused_file_fails_before_any_write(env, path: Path) -> None:
    store, _, instance = env

    message = _plan_failure(instance, _config(path))

    assert path.name in message
    assert "$" in message
    assert _database_untouched(store)


def test_oversized_file_is_refused_before_any_write(env, tmp_path: Path) -> None:
    store, _, instance = env
    data = lineups.genre_lineup(1)
    data["padding"] = "x" * (10 * 1024 * 1024)
    path = lineups.write(tmp_path, data, "huge.json")

    message = _plan_failure(instance, _config(path))

    assert "huge.json" in message
    assert f"{path.stat().st_size:,} bytes" in message
    assert "10 MB" in message
    assert _database_untouched(store)


@pytest.mark.parametrize(
    ("base_url", "token", "names"),
    [
        ("http://127.0.0.1:9", "secret-token-value", "PLEX_URL"),
        (None, "wrong-secret-token", "PLEX_TOKEN"),
    ],
    ids=["unreachable", "wrong-token"],
)
def test_plex_problems_name_the_variable_and_import_nothing(
    env, tmp_path: Path, base_url: str | None, token: str, names: str
) -> None:
    store, emulator, instance = env
    from resources.database import DatabaseResource
    from resources.plex import PlexResource

    path = lineups.write(tmp_path, lineups.genre_lineup(2))

    message = _plan_failure(
        instance,
        _config(path),
        database=DatabaseResource(url=store.engine.url.render_as_string(False)),
        plex=PlexResource(base_url=base_url or emulator.url, token=token),
    )

    assert names in message
    assert token not in message
    assert _database_untouched(store)


def test_export_import_export_round_trip(env, tmp_path: Path, database_url: str) -> None:
    store, _, instance = env
    from airwave_dagster.domain.lineup_file import dump_lineup, parse_lineup

    ok, run_id = _run(instance, _config(SPEC_EXAMPLE))
    assert ok
    reasons = {c["name"]: c["reason"] or "" for c in _report(store, run_id)["channels"]}
    assert "dropped PLEX_COLLECTION" in reasons["Family Film Night"]
    assert "library title not on this server" in reasons["Golden Age Sci-Fi"]
    assert "imported disabled" in reasons["Holiday Picks"]
    first = json.loads(dump_lineup(store.export_lineup()))
    exported = lineups.write(tmp_path, first, "export.json")
    parse_lineup(exported.read_bytes(), source="export.json")
    with store.engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE public.channel, public.channel_package CASCADE"))

    assert _run(instance, _config(exported))[0]
    second = json.loads(dump_lineup(store.export_lineup()))

    first.pop("exportedAt")
    second.pop("exportedAt")
    assert second == first
    assert len(first["channels"]) == 9


def test_reexecution_from_failure_rebuilds_only_the_failed_channel(env, tmp_path: Path) -> None:
    store, _, instance = env
    path = lineups.write(tmp_path, lineups.genre_lineup(5))
    # A real fault inside Postgres: channel 103 cannot be inserted until the trigger is dropped.
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE FUNCTION airwave_dagster.refuse_103() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected fault for channel 103'; END $$"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_103 BEFORE INSERT ON public.channel FOR EACH ROW "
                "WHEN (NEW.number = 103) EXECUTE FUNCTION airwave_dagster.refuse_103()"
            )
        )
    try:
        ok, parent = _run(instance, _config(path))
        assert not ok
    finally:
        with store.engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER refuse_103 ON public.channel"))
            conn.execute(sa.text("DROP FUNCTION airwave_dagster.refuse_103()"))

    with dg.execute_job(
        dg.reconstructable(import_lineup_job),
        instance=instance,
        run_config=instance.get_run_by_id(parent).run_config,
        reexecution_options=dg.ReexecutionOptions.from_failure(parent, instance),
    ) as child:
        assert child.success
        child_id = child.run_id

    report = _report(store, child_id)
    assert report["channels_created"] == 5
    built_in_child = {
        r["channel_number"] for r in store.traces(child_id) if r["step_name"] == "buildChannel"
    }
    assert built_in_child == {103}
    parent_builds = [r for r in store.traces(parent) if r["step_name"] == "buildChannel"]
    assert sorted(r["channel_number"] for r in parent_builds if r["status"] == "created") == [
        100,
        101,
        102,
        104,
    ]
    failed = [r for r in parent_builds if r["status"] == "failed"]
    assert [(r["channel_number"], r["attempt"]) for r in failed] == [(103, 1), (103, 2), (103, 3)]
    assert all("injected fault for channel 103" in r["error"] for r in failed)
    assert not any(r["step_name"] == "planImport" for r in store.traces(child_id))
    assert store.counts()["channels"] == 5
