"""Files shipped inside the package, found beside this module in a checkout, wheel or image."""

from pathlib import Path

DEMO_LINEUP = Path(__file__).resolve().with_name("demo_lineup.json")
"""The bundled example lineup: `airwave demo` imports it; the Launchpad's default dry-runs it."""
