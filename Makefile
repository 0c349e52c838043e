# The README's quick start: `make demo` and `make test`. Each installs what it needs into .venv, once:
# again only when pyproject.toml changes (the install is editable, so a change to the code needs none).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check proto install dev completions prometheus hwloc help-text bench image image-push

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Stamps: made after a successful install, older than pyproject.toml when it changed.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# The dev install has everything the plain one has: it stamps both.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed

dev: $(VENV)/.installed-dev

# The simulated node with the default scenario and the TUI on it.
demo: install
	$(BIN)/devctl demo

# The integration test of `devctl fleet` runs a real Prometheus. Debian's package (and what it pulls in) is
# installed only when asked: CI=true (a throwaway machine, as root) or `make test INSTALL_PROMETHEUS=1`,
# saying so. Otherwise nothing is installed, this says so, and that test skips, saying why.
INSTALL_PROMETHEUS ?= $(if $(filter true 1,$(CI)),1,)
prometheus:
	@if command -v prometheus >/dev/null 2>&1; then :; \
	elif [ "$(INSTALL_PROMETHEUS)" != 1 ]; then \
		echo "make: prometheus is not installed: the fleet integration test will skip (make test INSTALL_PROMETHEUS=1 installs it with apt-get)" >&2; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "make: no apt-get to install prometheus with: the fleet integration test will skip" >&2; \
	else \
		echo "make: installing prometheus with apt-get (CI=true or INSTALL_PROMETHEUS=1)" >&2; \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; } || \
		echo "make: could not install prometheus (not root?): the fleet integration test will skip" >&2; \
	fi

# The PCIe relationships are checked against hwloc's lstopo (tests/test_pcie_hwloc.py). Debian's package is
# installed only when asked, as prometheus above: CI=true or `make test INSTALL_HWLOC=1`. Otherwise that test skips.
INSTALL_HWLOC ?= $(if $(filter true 1,$(CI)),1,)
hwloc:
	@if command -v lstopo-no-graphics >/dev/null 2>&1; then :; \
	elif [ "$(INSTALL_HWLOC)" != 1 ]; then \
		echo "make: hwloc is not installed: the PCIe-vs-hwloc test will skip (make test INSTALL_HWLOC=1 installs it with apt-get)" >&2; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "make: no apt-get to install hwloc with: the PCIe-vs-hwloc test will skip" >&2; \
	else \
		echo "make: installing hwloc with apt-get (CI=true or INSTALL_HWLOC=1)" >&2; \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hwloc >/dev/null; } || \
		echo "make: could not install hwloc (not root?): the PCIe-vs-hwloc test will skip" >&2; \
	fi

# Generated code fresh, lint clean and formatted, layers kept, the core's types checked, every test passing.
test: dev prometheus hwloc
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

# The DaemonSet's image (deploy/Containerfile), tagged for the registry the nodes pull from, and pushed there;
# deploy/daemonset.yaml's `image:` names the same: make image-push REGISTRY=registry.example.com/team
REGISTRY ?= registry.example.com
IMAGE ?= $(REGISTRY)/devctl:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
CONTAINER_ENGINE ?= podman
image:
	$(CONTAINER_ENGINE) build -f deploy/Containerfile -t $(IMAGE) .

image-push: image
	$(CONTAINER_ENGINE) push $(IMAGE)
