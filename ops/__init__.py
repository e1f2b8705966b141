"""Dagster ops and the jobs built from them."""
