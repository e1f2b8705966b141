"""Airwave as a Dagster code location: lineup importer and AI lineup builder."""
