"""Tests of airwave_dagster.durability that need no run: the rules, over plain values."""
