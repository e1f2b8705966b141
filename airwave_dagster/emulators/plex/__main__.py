"""`python -m airwave_dagster.emulators.plex`: serve the synthetic library until interrupted."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from airwave_dagster.emulators.plex.server import DEFAULT_TOKEN, run_emulator


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the emulator in the foreground."""
    parser = argparse.ArgumentParser(
        prog="python -m airwave_dagster.emulators.plex",
        description="Serve a synthetic Plex library to the real plexapi client.",
    )
    parser.add_argument("--port", type=int, default=32400, help="TCP port (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--items", type=int, default=2000, help="movies + episodes to generate")
    parser.add_argument("--seed", type=int, default=7, help="dataset seed")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay per request")
    parser.add_argument("--token", default=DEFAULT_TOKEN, help="the X-Plex-Token to accept")
    parser.add_argument(
        "--full-listings",
        action="store_true",
        help="permissive: full tag lists in listings (real servers send only the first few)",
    )
    parser.add_argument(
        "--allow-without-token",
        action="store_true",
        help="also answer requests that carry no token, like a server that allows its local "
        "network without auth (a wrong token is still refused)",
    )
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    run_emulator(
        port=arguments.port,
        items=arguments.items,
        seed=arguments.seed,
        latency_ms=arguments.latency_ms,
        token=arguments.token,
        host=arguments.host,
        truncate_tags=not arguments.full_listings,
        allow_without_token=arguments.allow_without_token,
    )


if __name__ == "__main__":
    main()
