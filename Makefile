# Two commands on a fresh machine: `make demo` and `make test`. Every target bootstraps what it
# needs: uv (into .airwave/bootstrap when it is not on PATH), the locked virtualenv (.venv), and a
# private PostgreSQL under .airwave/ when AIRWAVE_DATABASE_URL is not set.
SHELL := /bin/bash
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo .airwave/bootstrap/bin/uv)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: compiled demo test test-container dev serve bench lint fmt clean stop

$(UV):
	$(PYTHON) -m venv .airwave/bootstrap
	.airwave/bootstrap/bin/pip install --quiet --disable-pip-version-check uv

# Bytecode is compiled at install time: machines of this kind set PYTHONDONTWRITEBYTECODE=1, so
# without stored .pyc files every Python process (CLI, code server, run worker, step) compiles
# Dagster's sources again, about 4 CPU seconds each. `compiled` does the same for this checkout's
# own packages (only what changed; Python still checks each .pyc against its source).
$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --compile-bytecode --python $(PYTHON)
	touch $@

compiled: $(VENV)/.synced
	$(BIN)/python -m compileall -q -j 0 airwave_dagster ops resources sensors bench tests > /dev/null

demo: compiled
	$(BIN)/airwave demo

# `dg check defs` loads the code location as Dagster's own tools do ([tool.dg] in pyproject.toml),
# over a throwaway instance unless DAGSTER_HOME is set. VIRTUAL_ENV names the venv dg runs from.
# Three pytest workers on two cores: most of the suite's time is waiting (process starts, Postgres
# kept down, daemons polling), which a third worker overlaps. Seen on the 2-core machine: 2,332
# tests in 17 min 38 s with three workers (not measured side by side with two).
test: compiled
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/dg check defs
	$(BIN)/pytest -n 3 --dist loadfile

# Builds the image (base from Debian packages: no registry needed) and drives the compose stack.
test-container: $(VENV)/.synced
	$(BIN)/pytest -m container -o log_cli=true tests/container

serve: compiled
	$(BIN)/airwave serve

dev: compiled
	$(BIN)/airwave dev

bench: compiled
	$(BIN)/python -m bench.run

lint: $(VENV)/.synced
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

fmt: $(VENV)/.synced
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

stop: $(VENV)/.synced
	$(BIN)/airwave db stop

# A cluster versions before 0.10 placed in /tmp for a deep checkout goes too (symlink .airwave/pg).
clean: stop
	if [ -L .airwave/pg ]; then rm -rf "$$(readlink -f .airwave/pg)"; fi
	rm -rf .airwave $(VENV)
