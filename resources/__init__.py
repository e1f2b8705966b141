"""Dagster resources: database, Plex, IO manager."""
