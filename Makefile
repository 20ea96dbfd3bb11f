# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The real control plane's binaries (docs/envtest.md): ../shared/kube-assets when it exists and
# neither OPTK_KUBE_ASSETS nor setup-envtest's KUBEBUILDER_ASSETS names others, so `make test`
# runs the real-server tier here; elsewhere it is skipped in one line.
KUBE_ASSETS := $(abspath ../shared/kube-assets)
ifeq ($(origin OPTK_KUBE_ASSETS)$(origin KUBEBUILDER_ASSETS),undefinedundefined)
ifneq ($(wildcard $(KUBE_ASSETS)),)
export OPTK_KUBE_ASSETS := $(KUBE_ASSETS)
endif
endif

.PHONY: test lint typecheck layers pytest demo clean bench soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The suite runs in two processes (pytest-xdist, one per core), a test file never split across
# them (module fixtures such as a shared control plane stay whole); each process has its own
# embedded server and, in the real tier, its own control plane. Most tests wait on servers and
# processes, so two halve the wall time (about 13 min so for 2,340 tests on 2 cores).
# --no-loadscope-reorder: files in collection order, the longest first (tests/conftest.py,
# LONGEST_FIRST), rather than by their number of tests (a long one-test file could run last,
# alone). A safeguard against such a tail: on a clean clone pytest took 13 min 3 s either way.
PYTEST_PARALLEL := -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# mypy (half a minute of one core) runs beside the tests, which mostly wait on servers; its
# report follows theirs, and either failing fails the target.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	@$(BIN)/mypy --strict objectmatcher builders reconciler > $(VENV)/mypy.log 2>&1 & typing=$$!; \
	echo "$(BIN)/mypy --strict objectmatcher builders reconciler (beside the tests)"; \
	echo "$(BIN)/pytest $(PYTEST_PARALLEL)"; \
	$(BIN)/pytest $(PYTEST_PARALLEL); tests=$$?; \
	wait $$typing; typed=$$?; cat $(VENV)/mypy.log; \
	test $$typed -eq 0 && test $$tests -eq 0

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict objectmatcher builders reconciler

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_PARALLEL)

# The Thanos example operator end to end on the embedded API server (docs/demo.md); exits
# non-zero when a step does not converge or the steady-state resync writes anything.
demo: $(STAMP)
	$(BIN)/python -m examples.thanos.demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache *.egg-info

# The reliability soak (docs/reliability.md), not in CI: the tests/reliability suite with soak
# sizes (50 parents, 20 crashes, 2,000 children, 500 watchers), then ten minutes of steady drift
# with memory and repair latency sampled, then the counts (last line: one JSON object); then the
# examples' operator state machines with fresh seeds for OPTK_MACHINE_SOAK_SECONDS (default 1800)
# and their report (.soak/machines.json: actions run, quiet points checked, failures).
soak: $(STAMP)
	OPTK_SOAK=1 $(BIN)/pytest tests/reliability -q
	$(BIN)/python -m tests.reliability.soak --seconds 600
	$(BIN)/python -m tests.reliability.report --json
	$(BIN)/python -m tests.testing.soak --seconds $${OPTK_MACHINE_SOAK_SECONDS:-1800}
