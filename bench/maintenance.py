"""Maintenance benchmarks: pure full-pass generation by pool size, and extending 50 channels.

`maintenance_section(db_url)` returns the markdown section `bench/run.py` appends to
BENCHMARKS.md; `python -m bench.maintenance` prints it on its own (private Postgres, database
`airwave_bench_maintenance`).
"""

from __future__ import annotations

import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from airwave_dagster.cli import environment
from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.schedule import MAX_ENTRIES, build_schedule, pass_order
from resources import tables as t
from resources.stores.channels import AirwaveStore
from resources.stores.engine import engine_for
from resources.stores.maintenance import MaintenanceStore
from resources.stores.rows import new_id

POOL_SIZES = (1_000, 10_000, 100_000)
EXTEND_CHANNELS = 50
EXTEND_POOL = 10_000
EXTEND_THREADS = 4
REPEATS = 5
BENCH_DATABASE = "airwave_bench_maintenance"


def synthetic_pool(size: int, *, seconds: tuple[int, int], seed: int = 1) -> list[MediaItem]:
    """Episodes with distinct rating keys and lengths drawn from `seconds` (inclusive)."""
    rng = random.Random(seed)
    return [
        MediaItem(
            rating_key=str(100_000 + i),
            type="episode",
            title=f"Episode {i}",
            duration_ms=rng.randint(*seconds) * 1000,
            show_rating_key=str(10 + i // 20),
            season=1 + (i // 10) % 5,
            episode=1 + i % 10,
        )
        for i in range(size)
    ]


def _best(repeats: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def generation_rows() -> list[str]:
    """Table rows: full-pass build and pass ordering time for each pool size (best of 5)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for size in POOL_SIZES:
        pool = synthetic_pool(size, seconds=(1_320, 3_600))
        build = build_schedule(pool, ordering="SHUFFLE", channel_seed=7, start_at=start)
        laid = len(build.entries)
        seconds = _best(
            REPEATS,
            lambda pool=pool: build_schedule(  # type: ignore[misc]
                pool, ordering="SHUFFLE", channel_seed=7, start_at=start
            ),
        )
        order = _best(
            REPEATS,
            lambda pool=pool: pass_order(  # type: ignore[misc]
                pool, ordering="SHUFFLE", base_seed=7, pass_index=0
            ),
        )
        capped = " (20,000-row cap)" if laid >= MAX_ENTRIES else ""
        rows.append(
            f"| {size:,} | {laid:,}{capped} | {seconds * 1000:.1f} ms "
            f"| {seconds / laid * 1e6:.2f} µs | {order * 1000:.1f} ms |"
        )
    return rows


def _reset(db_url: str) -> None:
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    names = ", ".join(f'{table.schema}."{table.name}"' for table in t.metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


def _prepare_channels(store: AirwaveStore, pool: list[MediaItem], now: datetime) -> list[str]:
    """50 channels at the extend threshold, each with its cursor at the start of a new pass."""
    with store.transaction() as conn:
        source = new_id()
        conn.execute(t.media_source.insert().values(id=source, name="bench", base_url="bench"))
        ids = []
        for number in range(1, EXTEND_CHANNELS + 1):
            channel_id = new_id()
            ids.append(channel_id)
            conn.execute(
                t.channel.insert().values(
                    id=channel_id,
                    number=number,
                    name=f"Bench {number}",
                    media_source_id=source,
                    shuffle_seed=number,
                    bumper_mode="OFF",
                    schedule_pass_seed=number * 7919,
                    schedule_pass_index=1,
                    schedule_pass_pos=0,
                )
            )
            # One row ending an hour from now: the runway is short, so every channel is due.
            conn.execute(
                t.schedule_item.insert().values(
                    channel_id=channel_id,
                    kind="PROGRAM",
                    starts_at=now,
                    duration_seconds=3600,
                    rating_key=pool[0].rating_key,
                )
            )
    return ids


def _extend_all(db_url: str, threads: int) -> dict[str, float]:
    _reset(db_url)
    store = AirwaveStore(engine_for(db_url))
    maintenance = MaintenanceStore(store)
    # Lengths averaging 62.5 s make one pass of 10,000 items about 7.2 days: each extension lays
    # exactly one whole pass, the "by 7 days" of the issue.
    pool = synthetic_pool(EXTEND_POOL, seconds=(45, 80))
    now = datetime.now(UTC).replace(microsecond=0)
    ids = _prepare_channels(store, pool, now)
    plans = [maintenance.channel_plan(channel_id) for channel_id in ids]
    lock = threading.Lock()
    per_channel: list[float] = []
    statuses: list[str] = []

    def extend(plan: object) -> None:
        started = time.perf_counter()
        outcome = maintenance.extend(plan, pool, now)  # type: ignore[arg-type]
        with lock:
            per_channel.append(time.perf_counter() - started)
            statuses.append(outcome.status)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool_executor:
        list(pool_executor.map(extend, plans))
    wall = time.perf_counter() - started
    if statuses.count("extended") != EXTEND_CHANNELS:
        raise RuntimeError(f"not every channel was extended: {sorted(set(statuses))}")
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(t.schedule_item)).scalar_one()
        runway = conn.execute(
            sa.text(
                # Airwave's columns hold the UTC wall clock: AT TIME ZONE makes it an instant.
                "SELECT min(tail) AT TIME ZONE 'UTC' FROM (SELECT "
                'max("startsAt" + "durationSeconds" * interval \'1 s\') AS tail '
                'FROM public.schedule_item GROUP BY "channelId") AS t'
            )
        ).scalar_one()
    added = rows - EXTEND_CHANNELS
    return {
        "wall": wall,
        "rows": added,
        "rate": added / wall,
        "median": statistics.median(per_channel),
        "runway_days": (runway - now) / timedelta(days=1),
    }


def maintenance_section(db_url: str) -> str:
    """Run both maintenance benchmarks against `db_url` (its airwave tables are emptied)."""
    lines = [
        "",
        "## Schedule generation: one full pass, by pool size (pure, no database)",
        "",
        "SHUFFLE, no bumpers, items of 22 to 60 min, best of 5. A full build lays at least one "
        "whole pass; the builder caps a build at 20,000 rows, which a 100,000-item pass reaches. "
        "Target: ≤ 100 ms for 10,000 items, linear in pool size (compare the time per row, and "
        "the ordering of the whole pool).",
        "",
        "| pool | rows laid | build | per row | pass order (shuffle) |",
        "|---:|---:|---:|---:|---:|",
        *generation_rows(),
        "",
    ]
    for threads in (1, EXTEND_THREADS):
        m = _extend_all(db_url, threads)
        if threads == 1:
            lines += [
                f"## extend: {EXTEND_CHANNELS} channels with {EXTEND_POOL:,}-item pools by 7 days",
                "",
                "Each channel is due (runway 1 h) with its cursor at a pass start; the pool's "
                "items average 62.5 s, so the extension lays one whole pass (about 7.2 days, "
                f"{EXTEND_POOL:,} rows) in one transaction per channel: lock, build, item upsert, "
                "row insert, cursor and pass seams. Pools are given (no Plex), so this is the "
                "database and builder cost alone.",
                "",
                "| concurrency | wall time | rows written | rows / s | median per channel "
                "| shortest runway after |",
                "|---:|---:|---:|---:|---:|---:|",
            ]
        lines.append(
            f"| {threads} | {m['wall']:.1f} s | {int(m['rows']):,} | {m['rate']:,.0f} "
            f"| {m['median']:.2f} s | {m['runway_days']:.1f} days |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    """Print the section against the private Postgres (a database of its own)."""
    server = environment.start_private_postgres(environment.airwave_home())
    db_url = environment.ensure_database(server, BENCH_DATABASE)
    environment.ensure_schemas(db_url)
    from resources.migrations import upgrade

    upgrade(db_url)
    sys.stdout.write(maintenance_section(db_url) + "\n")


if __name__ == "__main__":
    main()
