"""Where the tests find the reference system's own lineup exports (never copied into this repo).

`AIRWAVE_REFERENCE_EXPORTS` names the folder; by default it is `shared/data/airwave-exports` next
to the checkout, where the workplace keeps them. A missing folder fails the tests that read it.
"""

from __future__ import annotations

import os
from pathlib import Path

EXPORTS = Path(
    os.environ.get("AIRWAVE_REFERENCE_EXPORTS")
    or Path(__file__).resolve().parents[2].parent / "shared" / "data" / "airwave-exports"
)
"""The folder holding `presets-basic.json` and `presets-full-catalog.json`."""
