# Set-up and test entry points. Both build .venv from nothing; nothing else needs installing by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test venv bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,torch,jax]'
	touch $(STAMP)

venv: $(STAMP)

# The main job on the bundled examples: capture a PyTorch model into a validated graph, check it,
# bound it at three fidelities on two chips, and export it to Timeloop and AccelForge (in build/).
run: venv
	mkdir -p build
	$(BIN)/solar-io capture examples/models/llama_decoder.py -o build/llama_decoder.yaml
	$(BIN)/solar-io check build/llama_decoder.yaml examples/graphs/*.yaml
	$(BIN)/solar-io info build/llama_decoder.yaml
	$(BIN)/solar-io bound build/llama_decoder.yaml --hw thor,h100-sxm --measured 20us
	$(BIN)/solar-io export timeloop build/llama_decoder.yaml -o build/timeloop
	$(BIN)/solar-io export accelforge build/llama_decoder.yaml -o build/accelforge --arch thor

# Lint and the whole test suite: every test but the timing-sensitive ones on all CPUs (pytest-xdist;
# --dist loadfile: a file's tests share one worker, and so its module and session fixtures, e.g. the
# AccelForge runs; loadgroup would honour the xdist_group marks across files, but with pytest 9.2
# and xdist 3.8 it groups nothing: xdist renames item._nodeid, pytest 9 reads item._id), then those
# alone on a quiet machine (a probe and the runs checked against it must not share the CPUs).
# The second run collects only the files that mark a test serial (collecting all of them takes a minute).
PYTEST_WORKERS ?= auto
SERIAL_TESTS   := $(shell grep -l 'mark\.serial' tests/test_*.py)
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not serial"
	$(if $(SERIAL_TESTS),$(BIN)/python -m pytest -q -m serial $(SERIAL_TESTS))

bench: venv
	$(BIN)/python benchmarks/bench_io.py
	$(BIN)/python benchmarks/bench_bound.py
	$(BIN)/python benchmarks/bench_tiling.py
	$(BIN)/python benchmarks/bench_report.py

clean:
	rm -rf $(VENV) .venv-accelforge dist build .pytest_cache .ruff_cache .hypothesis
include mk/accelforge.mk
