"""Durability: complete resume, the code-version guard and crash detection for every job.

Dagster supplies most of what a crash-proof run needs (stored outputs, re-execution, run
monitoring, run retries). This package closes the gaps measured in docs/dagster-notes.md:

- `resume` — "re-execute from failure" that also runs the mapped steps that never started
  (dagster-io/dagster#20925), used by `airwave runs resume`, the UI, GraphQL and automatic retries;
- `versions` — refuse a re-execution whose ops' code versions differ from the parent run's;
- `instance`, `coordinator`, `run_launcher` — where those hook into Dagster (`dagster.yaml`):
  the instance's re-execution, the run queue's submit, and run-worker health checks so a run
  whose process vanished is marked failed by the monitoring daemon.

None of this is part of the pure domain; it imports Dagster internals, isolated here.
"""
