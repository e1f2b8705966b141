"""A local Plex Media Server emulator that serves a synthetic library to the real plexapi client."""

from airwave_dagster.emulators.plex.dataset import EmulatedLibrary, Item, build_library
from airwave_dagster.emulators.plex.server import (
    DEFAULT_TOKEN,
    EmulatorHandle,
    EmulatorOptions,
    run_emulator,
    start_emulator,
)

__all__ = [
    "DEFAULT_TOKEN",
    "EmulatedLibrary",
    "EmulatorHandle",
    "EmulatorOptions",
    "Item",
    "build_library",
    "run_emulator",
    "start_emulator",
]
