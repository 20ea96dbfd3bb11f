# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck layers pytest demo clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict objectmatcher builders reconciler
	$(BIN)/lint-imports
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict objectmatcher builders reconciler

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest

# The Thanos example operator end to end on the embedded API server (docs/demo.md); exits
# non-zero when a step does not converge or the steady-state resync writes anything.
demo: $(STAMP)
	$(BIN)/python -m examples.thanos.demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache *.egg-info
