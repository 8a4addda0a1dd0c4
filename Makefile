# The two commands of the README: `make book` and `make test`. Everything else is a helper.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JB_FLAGS := -W -n --keep-going
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: book test deps dev-deps unit notebooks papermill build-strict refresh bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.deps: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-deps: requirements-dev.txt $(VENV)/.deps
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

deps: $(VENV)/.deps
dev-deps: $(VENV)/.dev-deps

## make book: build the HTML book and say where it is
book: $(VENV)/.deps
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is at $(CURDIR)/_build/html/index.html"

## make test: unit + property tests, nbval, papermill scenarios, strict book build, then the built book in a
## real browser (calculators vs vramlib, console errors, dead controls, search) and the page weights
test: $(VENV)/.dev-deps
	@command -v node >/dev/null || { $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs; }
	$(BIN)/python -m pytest tests -q --ignore=tests/browser
	$(BIN)/python -m pytest -q --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly book/
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; }
	VRAMLIB_BROWSER_TESTS=1 $(BIN)/python -m pytest tests/browser -q -p no:randomly
	$(BIN)/python tools/page_weight.py
	@echo "make test: all steps passed"

## make refresh: re-execute the notebooks in place (after a library change; nbval then compares against these),
## written in the normal form of tools/notebook_format.py (no widget state, execution counts or timings)
refresh: $(VENV)/.deps
	$(BIN)/python tools/refresh_notebooks.py

## make bench: timings in ms and as multiples of a calibration loop timed in the same run; verdicts are those
## ratios (and zero lambdify when warm), the ms targets are information (run `make book` first: bench_panels
## reads the built pages). The tests time nothing: they count the work (tests/costs.py)
bench: $(VENV)/.deps
	$(BIN)/python tools/bench.py
	$(BIN)/python tools/bench_plan.py
	$(BIN)/python tools/bench_panels.py
	$(BIN)/python tools/bench_compare.py

clean:
	rm -rf _build
