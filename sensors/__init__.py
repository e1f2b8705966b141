"""Sensors that decide when runs start."""
