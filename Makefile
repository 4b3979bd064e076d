# Set-up and test entry points. Both build .venv from nothing; nothing else needs installing by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test venv bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,torch]'
	touch $(STAMP)

venv: $(STAMP)

# The main job on the bundled examples: check every graph, summarise one, bound it on two chips.
run: venv
	$(BIN)/solar-io check examples/graphs/*.yaml
	$(BIN)/solar-io fmt --check examples/graphs/*.yaml
	$(BIN)/solar-io info examples/graphs/attention.yaml
	$(BIN)/solar-io bound examples/graphs/attention.yaml --hw thor,h100-sxm --measured 3.1ms

# Lint and the whole test suite.
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: venv
	$(BIN)/python benchmarks/bench_io.py
	$(BIN)/python benchmarks/bench_bound.py

clean:
	rm -rf $(VENV) .venv-accelforge dist build .pytest_cache .ruff_cache .hypothesis
include mk/accelforge.mk
