# Set-up and test entry points. Both build .venv from nothing; nothing else needs installing by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test venv bench clean

# pyproject.toml declares ranges (torch>=2.6, ...); constraints.txt pins what this set-up installs
# (the torch 2.13.0 CPU build, a local file on this project's machines: no download of gigabytes).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,torch,jax]'
	touch $(STAMP)

venv: $(STAMP)

# The demo: capture a Llama-3-8B-shaped decoder prefilling 4096 tokens (bf16, on meta tensors: no
# weight memory), check it, bound it on H100, B200 and Thor (unfused, fused, cache-aware side by side,
# roofline PNG), the inverse roofline of a latency target (and the headroom of MEASURED), an HTML
# report, a picture of the graph, and the exports, all in build/.
DEMO        := build/llama3_8b
DEMO_HW     := h100-sxm,b200,thor
# A measured H100 SXM time of this same computation (bf16 prefill of 4096 tokens, last-position logits)
# gives the headroom per fidelity: make run MEASURED=<time>. README (The demo) says why none is built in.
MEASURED    ?=
TARGET      ?= 25ms
run: venv
	mkdir -p build
	$(BIN)/solar-io capture examples/models/llama3_8b.py --dtype bf16 -o $(DEMO).yaml
	$(BIN)/solar-io check $(DEMO).yaml examples/graphs/*.yaml
	$(BIN)/solar-io info $(DEMO).yaml
	$(BIN)/solar-io bound $(DEMO).yaml --hw $(DEMO_HW) --top 5 --plot build/roofline.png
	$(BIN)/solar-io bound $(DEMO).yaml --hw h100-sxm $(if $(MEASURED),--measured $(MEASURED)) --top 3 \
	    --target-latency $(TARGET) --html build/report.html
	$(BIN)/solar-io graph $(DEMO).yaml --hw h100-sxm -o build/llama3_8b.$(if $(shell command -v dot),svg,mmd)
	$(BIN)/solar-io export timeloop $(DEMO).yaml -o build/timeloop
	$(BIN)/solar-io export accelforge $(DEMO).yaml -o build/accelforge --arch thor

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
