# The README's two commands: `make run` and `make test`. Each sets up .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
EXAMPLE ?= examples/traffic.py
CLUSTER ?= examples/clusters/gpu-pool

.PHONY: run test setup setup-dev lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Runtime install: the core and the CLI. torch is never pulled in here; the
# `torch` extra pins torch==2.13.0 (the CPU wheel on these machines).
$(VENV)/.setup-run: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[solver]'
	touch $@

$(VENV)/.setup-dev: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[dev,solver,notebooks]'
	touch $@ $(VENV)/.setup-run

setup: $(VENV)/.setup-run
setup-dev: $(VENV)/.setup-dev

run: $(VENV)/.setup-run
	$(BIN)/vf explain $(EXAMPLE)
	$(BIN)/vf plan $(EXAMPLE) --cluster $(CLUSTER)

lint: $(VENV)/.setup-dev
	$(BIN)/ruff check src tests bench examples notebooks
	$(BIN)/ruff format --check src tests bench examples notebooks

typecheck: $(VENV)/.setup-dev
	$(BIN)/mypy

pytest: $(VENV)/.setup-dev
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(VENV)/.setup-dev
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
