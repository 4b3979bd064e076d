# Set-up and test entry points. Both build .venv from nothing; nothing else needs installing by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test venv bench clean

# Bytecode caches on for everything make runs. Where PYTHONDONTWRITEBYTECODE is set (as on this
# project's machines) no .pyc is ever written outside what pip compiled, so every process compiles
# solar_io from source again and every pytest worker re-rewrites and compiles each test module:
# collecting the suite took 19.7 s CPU that way and 7.9 s with the caches (fresh clone, same hour).
# An empty value is "unset" for Python; the caches are __pycache__ folders, which git ignores.
export PYTHONDONTWRITEBYTECODE :=

# pyproject.toml declares ranges (torch>=2.6, ...); constraints.txt pins what this set-up installs
# (the torch 2.13.0 CPU build, a local file on this project's machines: no download of gigabytes).
# --no-compile: pip would compile every module of every package it installs (torch, jax, scipy: 1 min
# 31 s for this install on 2 cores against 31 s without it); the bytecode caches above compile, once,
# only the modules a run imports (9 s for torch, jax and flax the first time).
PIP_INSTALL := -m pip install --quiet --no-compile
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python $(PIP_INSTALL) -c constraints.txt -e '.[dev,torch,jax]'
	touch $(STAMP)

venv: $(STAMP)

# What the demo alone needs: torch (capture) and matplotlib (the roofline PNG), none of jax, ray, numba,
# selenium or the test tools: about half the install time of the full set-up, so `make run` from nothing
# stays under two minutes (benchmarks/bench_make_run.py times each step). Where the full set-up
# exists, run uses it; `make test` after `make run` adds the rest to the same .venv.
RUN_STAMP := $(VENV)/.run-stamp
$(RUN_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP_INSTALL) -c constraints.txt -e '.[torch,plot]'
	touch $(RUN_STAMP)

# The demo: capture a Llama-3-8B-shaped decoder prefilling 4096 tokens (bf16, on meta tensors: no
# weight memory), check it, bound it on H100, B200 and Thor (unfused, fused, cache-aware side by side,
# roofline PNG), the inverse roofline of a latency target (and the headroom of MEASURED), an HTML
# report, a picture of the graph, and the exports, all in build/. Then the headroom against a
# published H100 time, on the graph of exactly the computation that was timed (PUBLISHED_*).
DEMO        := build/llama3_8b
DEMO_HW     := h100-sxm,b200,thor
# A measured H100 SXM time of this same computation (bf16 prefill of 4096 tokens, last-position logits)
# gives the headroom per fidelity: make run MEASURED=<time>. README (The demo) says why none is built in.
MEASURED    ?=
TARGET      ?= 25ms
# The published measurement (README, The demo): TensorRT-LLM v0.9.0, docs/source/performance.md,
# "Low Latency", table "H100 GPUs (FP8)", row LLaMA 7B, batch 1, input 2048: 1st token latency 30.8 ms.
# examples/models/llama2_7b.py is that network and shape; bound in fp8 (every tensor one byte, every
# contraction at the fp8 peak: no slower than the FP8 engine), a lower bound of the timed run.
PUBLISHED       := build/llama2_7b
PUBLISHED_TIME  := 30.8ms
PUBLISHED_DTYPE := fp8_e4m3
# GNU make 4 keeps each side-by-side job's output together; 3.81 (macOS) has no --output-sync
SYNC_OUTPUT     := $(if $(filter 3.%,$(MAKE_VERSION)),,--output-sync=target)
run: $(if $(wildcard $(STAMP)),$(STAMP),$(RUN_STAMP))
	mkdir -p build
	@# the two captures side by side (one per core); each prints its one line when it is done
	@$(MAKE) --no-print-directory -j2 $(SYNC_OUTPUT) $(DEMO).yaml $(PUBLISHED).yaml
	$(BIN)/solar-io check $(DEMO).yaml examples/graphs/*.yaml
	$(BIN)/solar-io info $(DEMO).yaml
	$(BIN)/solar-io bound $(DEMO).yaml --hw $(DEMO_HW) --top 5 --plot build/roofline.png
	$(BIN)/solar-io bound $(DEMO).yaml --hw h100-sxm $(if $(MEASURED),--measured $(MEASURED)) --top 3 \
	    --target-latency $(TARGET) --html build/report.html
	$(BIN)/solar-io graph $(DEMO).yaml --hw h100-sxm -o build/llama3_8b.$(if $(shell command -v dot),svg,mmd)
	$(BIN)/solar-io export timeloop $(DEMO).yaml -o build/timeloop
	$(BIN)/solar-io export accelforge $(DEMO).yaml -o build/accelforge --arch thor
	@echo "Published: $(PUBLISHED_TIME) measured by NVIDIA on one H100 from a 2048-token prompt (batch 1) to the first"
	@echo "  token of Llama 2 7B, TensorRT-LLM v0.9.0 FP8 engine ('Performance of TensorRT-LLM', Low Latency, table"
	@echo "  H100 GPUs (FP8): https://github.com/NVIDIA/TensorRT-LLM/blob/v0.9.0/docs/source/performance.md)."
	@echo "  Its bound: examples/models/llama2_7b.py (that network and shape) in fp8 (--dtype $(PUBLISHED_DTYPE))"
	$(BIN)/solar-io bound $(PUBLISHED).yaml --hw h100-sxm --dtype $(PUBLISHED_DTYPE) --measured $(PUBLISHED_TIME) \
	    --top 1 2>$(PUBLISHED).stderr || { cat $(PUBLISHED).stderr >&2; exit 1; }
	@cat $(PUBLISHED).stderr >&2
	@if grep -q "beats the" $(PUBLISHED).stderr; then \
	  echo "make run: the published $(PUBLISHED_TIME) beats a lower bound of the computation it timed:" \
	       "the graph, the spec or the reading of the source is wrong" >&2; exit 1; fi

# The demo's graphs, captured afresh every run (the capture is what the demo shows).
$(DEMO).yaml $(PUBLISHED).yaml: build/%.yaml: examples/models/%.py FORCE
	$(BIN)/solar-io capture $< --dtype bf16 -o $@

.PHONY: FORCE
FORCE:

# Lint and the whole test suite: every test but the timing-sensitive ones on all CPUs (pytest-xdist;
# --dist loadfile: a file's tests share one worker, and so its module and session fixtures, e.g. the
# AccelForge runs; loadgroup would honour the xdist_group marks across files, but with pytest 9.2
# and xdist 3.8 it groups nothing: xdist renames item._nodeid, pytest 9 reads item._id), then those
# alone on a quiet machine (a probe and the runs checked against it must not share the CPUs).
# The second run collects only the files that mark a test serial (collecting all of them takes a minute).
PYTEST_WORKERS ?= auto
SERIAL_TESTS   := $(shell grep -rl --include='test_*.py' 'mark\.serial' tests)
# What make test needs, built side by side (-j4: the two venvs' pip installs and apt-get at once;
# browser waits for jail, apt-get holds one lock): about a minute less than one after the other.
.PHONY: test-setup
test-setup: venv accelforge-venv browser jail

test:
	@$(MAKE) --no-print-directory -j4 test-setup
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
include mk/jail.mk
include mk/browser.mk
