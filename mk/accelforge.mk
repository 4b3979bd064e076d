# AccelForge, the real consumer of `solar-io export accelforge`, needs Python >= 3.12 and lives
# in its own environment, .venv-accelforge, that tests/exporters/test_export_*.py run
# tests/accelforge_check.py with. Built once and cached (rebuilt when this file changes).
# Without any Python 3.12 the target only says so, and those tests skip with that reason.
# Included from the Makefile: `include mk/accelforge.mk`.

PYTHON312          ?= python3.12
ACCELFORGE_VERSION ?= 1.0.467
AF_VENV            := .venv-accelforge
AF_STAMP           := $(AF_VENV)/.installed-stamp

.PHONY: accelforge-venv

$(AF_STAMP): mk/accelforge.mk
	@if PYENV_VERSION=$${PYENV_VERSION:-3.12.1} $(PYTHON312) --version >/dev/null 2>&1; then \
	  rm -rf $(AF_VENV) && \
	  PYENV_VERSION=$${PYENV_VERSION:-3.12.1} $(PYTHON312) -m venv $(AF_VENV) && \
	  $(AF_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	  $(AF_VENV)/bin/python $(PIP_INSTALL) 'accelforge==$(ACCELFORGE_VERSION)' && \
	  touch $(AF_STAMP); \
	else \
	  echo "$(PYTHON312) not found: AccelForge checks will be skipped (they need Python >= 3.12)"; \
	fi

accelforge-venv: $(AF_STAMP)

# `make test` builds it first (its test-setup target, beside the other set-up: Makefile).
