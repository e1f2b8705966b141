"""What loading the code location costs: every run worker and step forkserver pays it."""

from __future__ import annotations

import subprocess
import sys

from ops.steps import LLM_PRELOAD, preload_modules

PROBE = """
import sys
import airwave_dagster.definitions
print(sorted(name for name in sys.modules if name.split(".")[0] == "anthropic"))
"""


def test_the_code_location_loads_without_the_anthropic_sdk() -> None:
    # A fresh interpreter, as a run worker is: nothing imported before the location.
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "[]"


def test_only_steps_that_call_the_model_get_the_sdk_preloaded() -> None:
    assert set(LLM_PRELOAD) <= set(preload_modules(llm_pool=True))
    assert not set(LLM_PRELOAD) & set(preload_modules(llm_pool=False))
    assert "airwave_dagster.definitions" in preload_modules(llm_pool=False)
