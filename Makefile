# The README's two commands: `make run` and `make test`. Each sets up .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
EXAMPLE ?= examples/traffic/flow.py
CLUSTER ?= examples/traffic/cluster

.PHONY: run test setup setup-dev lint typecheck pytest bench mutation clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The `torch` extra pins torch==2.13.0: pip takes the CPU wheel that lies on disk
# on these machines. An unpinned torch would pull a multi-GB CUDA build.
# `make run` also installs the notebooks extra (matplotlib, jupytext): the README
# points a new user at notebooks/capacity_planning.py right after it.
# Our sources are compiled once here: where PYTHONDONTWRITEBYTECODE is set, every `vf`
# process (and each broker worker's fork server) would compile them again at start.
$(VENV)/.setup-run: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[solver,torch,notebooks]'
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q src > /dev/null
	touch $@

$(VENV)/.setup-dev: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[dev,solver,notebooks,torch]'
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q src > /dev/null
	touch $@ $(VENV)/.setup-run

setup: $(VENV)/.setup-run
setup-dev: $(VENV)/.setup-dev

run: $(VENV)/.setup-run
	$(BIN)/vf explain $(EXAMPLE)
	$(BIN)/vf plan $(EXAMPLE) --cluster $(CLUSTER)
	$(BIN)/vf run $(EXAMPLE)

lint: $(VENV)/.setup-dev
	$(BIN)/ruff check src tests bench examples notebooks
	$(BIN)/ruff format --check src tests bench examples notebooks

typecheck: $(VENV)/.setup-dev
	$(BIN)/mypy

# Two workers (pytest-xdist): the suite's processes wait on servers and subprocesses as
# much as they compute, so 2 workers take about half the time on 2 cores; more take
# longer there (measured: docs/testing.md). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
pytest: $(VENV)/.setup-dev
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

test: lint typecheck pytest

bench: $(VENV)/.setup-dev
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing of vfcore's decision modules (docs/testing.md): mutmut on a copy of
# the tree, each module against its own tests, hypothesis derandomized. Slow (minutes
# to hours per module): not part of `make test`. MODULES=quantity scaling … picks some.
MODULES ?=
MUTATION_DIR ?= /tmp/vf-mutation
mutation: $(VENV)/.setup-dev
	$(PIP) install 'mutmut==3.8.1'
	$(BIN)/python tools/mutation.py --workdir $(MUTATION_DIR) $(MODULES)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
