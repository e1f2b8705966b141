"""`airwave worker`: a celery worker that runs the steps of runs on the celery executor."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import click

from airwave_dagster.cli import console


@click.command("worker")
@click.option("--concurrency", default=2, show_default=True, help="Steps this worker runs at once.")
@click.option("--queue", help="The celery queue to serve (default: AIRWAVE_CELERY_QUEUE).")
@click.option("--name", help="The worker's node name (default: airwave-<pid>@<host>).")
def worker_command(concurrency: int, queue: str | None, name: str | None) -> None:
    """Serve channel builds from the broker for runs on the celery executor (foreground).

    The worker needs what a step needs and nothing local: the broker
    (AIRWAVE_CELERY_BROKER_URL), the database (AIRWAVE_DATABASE_URL; Dagster's storage follows
    it) and Plex (PLEX_URL, PLEX_TOKEN). Run as many as you like, on any machine that reaches
    those; each takes at most --concurrency steps at a time.
    """
    from airwave_dagster.settings import CELERY_QUEUE_ENV, Settings

    if concurrency < 1:
        console.fail("--concurrency must be at least 1")
    console.prepare(plex=True)
    settings = Settings.load()
    if not settings.celery_broker_url:
        console.fail("airwave worker needs AIRWAVE_CELERY_BROKER_URL (the celery broker)")
    queue = queue or settings.celery_queue
    os.environ[CELERY_QUEUE_ENV] = queue
    node = name or f"airwave-{os.getpid()}@{socket.gethostname()}"
    console.stderr.print(
        f"celery worker {node}: queue {queue}, {concurrency} step(s) at a time", highlight=False
    )
    # As for `airwave dev`: a background shell may have left these ignored, and a worker that
    # cannot be stopped by SIGTERM would keep taking steps (docs/dagster-notes.md §0.3).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    celery = str(Path(sys.executable).parent / "celery")
    os.execv(
        celery,
        [
            celery,
            "-A",
            "ops.celery_worker",
            "worker",
            "-Q",
            queue,
            "-c",
            str(concurrency),
            "-n",
            node,
            "--prefetch-multiplier=1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
    )
