# The README's quick start: `make demo` and `make test`. Each installs what it needs into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check proto install dev completions prometheus help-text bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'

# The simulated node with the default scenario and the TUI on it.
demo: install
	$(BIN)/devctl demo

# The integration test of `devctl fleet` runs a real Prometheus: Debian's package is installed where apt-get
# can (quietly); where it cannot, nothing fails here and that test skips, saying why.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null 2>&1; } || \
		echo "make: could not install prometheus (not root?); the fleet integration test will skip" >&2

# Generated code fresh, lint clean and formatted, layers kept, the core's types checked, every test passing.
test: dev prometheus
	$(BIN)/python scripts/gen_proto.py --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2

check: test

proto: dev
	$(BIN)/python scripts/gen_proto.py

completions: install
	for s in bash zsh fish; do $(BIN)/devctl completion $$s > completions/devctl.$$s; done

# The stored top-level help that `devctl --help` prints without importing typer (devctl/cli/start.py).
help-text: install
	$(BIN)/python scripts/gen_help.py

# The benches of docs/performance*.md, their figures in one JSON file (BENCH_OUT); never part of `make test`.
# Compare two runs with: $(BIN)/python bench/compare.py OLD.json NEW.json (exit 1 on a regression > 20 %).
BENCH_OUT ?= bench/results/$(shell date -u +%Y%m%dT%H%M%SZ).json
bench: install
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/python bench/bench_read.py --json "$$tmp/read.json" && \
	$(BIN)/python bench/bench_tui.py --json "$$tmp/tui.json" && \
	$(BIN)/python bench/compare.py --merge $(BENCH_OUT) "$$tmp"/*.json
