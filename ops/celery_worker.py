"""The celery app `airwave worker` serves: dagster-celery's step task, on the project's broker.

`celery -A ops.celery_worker worker` loads this module. The app is built from the same
`celery_app_args` the run worker submits with, so both sides agree on broker, queue and the
late-acknowledgement rules; a step task reconstructs its job from `airwave_dagster.definitions`
and reaches the instance, claims and outputs through Postgres only.
"""

from __future__ import annotations

from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from airwave_dagster.settings import Settings
from ops.steps import celery_app_args

app = make_app(celery_app_args(Settings.load()))
execute_plan = create_task(app)
