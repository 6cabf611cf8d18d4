# The book's two commands: `make book` and `make test` (see README.md).
# Every target sets up .venv first; setup is idempotent.

PROFILE ?= default
# The interpreter for .venv: PYTHON=... when given, else the first of python3.11, 3.12, 3.13 on PATH.
SUPPORTED_PYTHONS := python3.11 python3.12 python3.13
# (A name counts only if it runs: a pyenv shim for a version that is not selected does not.)
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in $(SUPPORTED_PYTHONS); do $$p -c '' 2>/dev/null && { command -v $$p; break; }; done)
endif
# The newest of them that runs, for the second environment of .ci/run.
NEWEST_PYTHON := $(shell for p in python3.13 python3.12 python3.11; do $$p -c '' 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

NB_DIR := _build/nb/$(PROFILE)
ifeq ($(PROFILE),ci)
SITE_ROOT := _build/ci
else
SITE_ROOT := .
endif
HTML_DIR := $(SITE_ROOT)/_build/html

# Determinism and quiet batch runs (CPU JAX, fixed thread counts, hash seed, no progress bars,
# XLA's options at their defaults, JAX's compilation cache): the settings of
# lib/bookkit/environment.py, which the one-page executor, `make lab` and the tests apply too
# (the tests with XLA's backend at optimisation level 0); each NAME=value it prints is exported here.
# (Notebook kernels draw with the inline backend: see bookkit.book.execute.INLINE_BACKEND.)
BOOK_ENVIRONMENT := $(shell PYTHONPATH=$(CURDIR)/lib $(or $(PYTHON),python3) -m bookkit.environment $(CURDIR))
$(if $(BOOK_ENVIRONMENT),,$(warning no Python ran lib/bookkit/environment.py: the book's process settings are not set))
$(foreach setting,$(BOOK_ENVIRONMENT),$(eval export $(setting)))

.PHONY: help setup execute html book test unit format format-check nbval browser site-checked bench record-paper record-optimisers record-khop record-bayesopt record-causal check-newest-python lab pdf peers-setup peers bench-peers clean

help:
	@echo "make book                 set up, execute every page (default profile), render _build/html"
	@echo "make book PROFILE=paper   the same at the paper's sizes (hours)"
	@echo "make test                 set up, execute the ci profile, unit tests, nbval, book build, browser check"
	@echo "make bench                run the benchmarks and write book/_data/benchmarks.json"
	@echo "make record-paper         run Part I's experiments at the paper's sizes, record their runtimes and results"
	@echo "make record-optimisers    run Part I's optimiser pages at the paper's sizes (hours), record their results"
	@echo "make record-khop          train Part III's models at k <= 8, n = 100 (hours), record their errors"
	@echo "make record-bayesopt      train Part IV's PFNs in d = 1..5, 3 seeds each (about 1.5 h), record their KLs"
	@echo "make record-causal        run Part VI's structure-learning benchmark on its whole grid, record it"
	@echo "make peers                (optional) PyTorch + curvlinops + BoTorch environment .venv-peers, cross-framework tests"
	@echo "make bench-peers          (optional) the growth-rate unit timed with PyTorch + curvlinops and with ours"
	@echo "make pdf                  the whole book as one PDF (_build/pdf/book.pdf), checked"
	@echo "make format               format every page's code cells (ruff, 72 columns, through jupytext)"
	@echo "make lab                  JupyterLab on the repository: open any page (.md) as a notebook and run it"

# setup: pick the interpreter, (re)create .venv when it is missing or was made by another
# interpreter (its base prefix or version differs), then install when the lock or pyproject
# changed. Python 3.11-3.13 only.
setup:
	@if [ -z "$(PYTHON)" ]; then \
		echo "setup: no python3.11, python3.12 or python3.13 on PATH; the book supports Python 3.11-3.13: install one, or pass PYTHON=/path/to/python3.1x" >&2; exit 1; fi
	@$(PYTHON) -c '' 2>/dev/null || { echo "setup: $(PYTHON) does not run; the book supports Python 3.11, 3.12 and 3.13: pass PYTHON=python3.11, python3.12 or python3.13" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 11) <= v <= (3, 13) else "setup: $(PYTHON) is Python %d.%d; the book supports Python 3.11, 3.12 and 3.13 (pass PYTHON=python3.11, python3.12 or python3.13)" % v)'
	@want=$$($(PYTHON) -c 'import sys; print(sys.base_prefix, sys.version.split()[0])'); \
	have=$$($(PY) -c 'import sys; print(sys.base_prefix, sys.version.split()[0])' 2>/dev/null); \
	echo "setup: Python $${want##* } ($(PYTHON))"; \
	if [ "$$want" != "$$have" ]; then \
		echo "setup: creating $(VENV) with it$${have:+ (it had Python $${have##* })}"; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); fi
	@$(MAKE) --no-print-directory $(STAMP)

# --no-compile: pip does not byte-compile every module it installs (on 2 cores 35 s instead of
# 72 s); Python writes the bytecode of the modules that are imported, once, on first import.
# For that, make's commands run without PYTHONDONTWRITEBYTECODE where the shell sets it.
unexport PYTHONDONTWRITEBYTECODE
$(STAMP): requirements.lock pyproject.toml
	@echo "setup: installing requirements.lock into $(VENV) ($$($(PY) --version))"
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

execute: setup
	$(PY) -m bookkit.book.execute --profile $(PROFILE) --out $(NB_DIR)

html: setup
	$(PY) -m bookkit.book.render --notebooks $(NB_DIR) --site-root $(SITE_ROOT)

# The built pages in Chromium at 1280 x 900: MathJax, and no code block, output or display
# equation wider than its box (the layout part of `make browser`; about half a minute).
book: execute html
	$(PY) -m bookkit.book.browser_check --site $(HTML_DIR) --layout-only
	@echo "book: $(HTML_DIR)/index.html"

# --dist loadfile: each test module runs in one worker, so a module's JAX programs compile in
# one process only (on a fresh clone with an empty compilation cache, 2 cores: 340-371 s
# against 377-411 s with the default distribution; a small gain, within the runs' spread).
# The tests compile at XLA's backend optimisation level 0 (tests/conftest.py; see
# lib/bookkit/environment.py): about a quarter less time, mostly compilation.
unit: setup
	$(PY) -m pytest tests -q -n 2 --dist loadfile

# Every code cell of every page is what `ruff format --line-length 72` makes of it (through
# jupytext), and no code line a page shows is over 72 characters (bookkit.book.format_check).
format-check: setup
	$(PY) -m bookkit.book.format_check

# Apply the formatter to every page it would change (jupytext --pipe, ruff format, 72 columns).
format: setup
	$(PY) -m bookkit.book.format_check --fix

nbval: setup
	MPLBACKEND=module://matplotlib_inline.backend_inline $(PY) -m pytest -q --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		-n 2 --dist loadscope $(NB_DIR)/book

browser: setup
	$(PY) -m bookkit.book.browser_check --site $(HTML_DIR) --screenshot _build/front-page.png

# The unit tests (two workers) run beside the execution of the ci pages (two kernels), then
# nbval (two kernels) beside the site build and browser check (one process each; the browser
# mostly waits for pages to render). Each step alone leaves part of a core idle (a last long
# test module or page, compilation between runs); side by side they keep both cores busy.
# Each step's output is printed whole when it ends (--output-sync); a failing step fails the
# target.
test: PROFILE := ci
test: setup
	$(MAKE) --no-print-directory format-check
	$(MAKE) --no-print-directory -j2 --output-sync=target unit execute PROFILE=ci
	$(MAKE) --no-print-directory -j2 --output-sync=target nbval site-checked PROFILE=ci

# The site built from the executed pages, then checked in the browser (in this order).
site-checked:
	$(MAKE) --no-print-directory html
	$(MAKE) --no-print-directory browser

# The pages of a folder of the book, in the order of _toc.yml.
toc_pages = $(shell $(PY) -m bookkit.book.toc $(1))

# Part I's experiment pages at the paper's sizes (about 1.5 h), runtimes kept for the
# execution page in book/_data/paper_part1.json, and each page's recorded results (with the
# date) in book/_data/recorded/paper/<page>.json, shown on the pages beside the live run.
record-paper: setup
	$(PY) -m bookkit.book.execute --profile paper --out _build/nb/paper-part1 \
		$(addprefix --page ,$(call toc_pages,book/experiments)) --record book/_data/paper_part1.json \
		--keep-results book/_data/recorded

# Part I's optimiser pages at the paper's sizes (hours). Each page that passes keeps its
# results and figures, with the date, in book/_data/recorded/paper/, which the page shows
# beside its own (HISTORY.md there says how the runs went).
record-optimisers: setup
	$(PY) -m bookkit.book.execute --profile paper --out _build/nb/paper-optimisers \
		$(addprefix --page ,$(call toc_pages,book/optimisers)) --keep-results book/_data/recorded

# Part III's training page with its own profile khop-large (book/profiles.yml: k up to 8,
# n = 100, about 4 CPU hours). Its errors per depth and k are kept, with the date, in
# book/_data/recorded/khop-large/training.json, which the page shows, only if the page's
# assertions all hold.
record-khop: setup
	$(PY) -m bookkit.book.execute --profile khop-large --out _build/nb/khop-large \
		--page book/khop/training.md --keep-results book/_data/recorded

# Part IV's dimensions page with its own profile bayesopt-dims (book/profiles.yml): page 3's
# PFN trained per input dimension d = 1..5 from 3 seeds, about 5 minutes each on 2 cores (d = 3:
# about 10), about 1.5 CPU hours in all. Its KLs are kept, with the date, in
# book/_data/recorded/bayesopt-dims/dimensions.json, which the page shows and decides.
record-bayesopt: setup
	$(PY) -m bookkit.book.execute --profile bayesopt-dims --out _build/nb/bayesopt-dims \
		--page book/bayesopt/dimensions.md --keep-results book/_data/recorded

# Part VI's structure-learning benchmark on the whole grid (the page's profile causal-grid:
# ER-2 and scale-free graphs both ways, d in {10, 20, 50}, 10 graphs per cell; about half an
# hour). Its results are kept, with the date, in book/_data/recorded/causal-grid/benchmarks.json,
# which the page shows, only if the page's assertions all hold.
record-causal: setup
	$(PY) -m bookkit.book.execute --profile causal-grid --out _build/nb/causal-grid \
		--page book/causal/benchmarks.md --keep-results book/_data/recorded

# A second environment made with the newest supported Python on the machine (.ci/run calls it;
# PYTHON=... picks another interpreter): every pin installed, a representative subset of the
# unit tests (the environment and layout checks, one test module per part; the whole suite
# runs under the default interpreter) and one page.
NEWEST_VENV := .venv-newest
NEWEST_TESTS := tests/test_environment.py tests/test_layout.py tests/test_dependencies.py tests/core/test_validate.py \
	tests/hessian/test_blocks.py tests/cross_entropy/test_divergences.py tests/khop/test_task.py \
	tests/bayesopt/test_gp.py tests/tcbo tests/causal/test_scm.py tests/causal/test_sortability.py
check-newest-python:
	@echo "check-newest-python: $(NEWEST_PYTHON)"
	$(MAKE) --no-print-directory setup VENV=$(NEWEST_VENV) PYTHON=$(NEWEST_PYTHON)
	$(NEWEST_VENV)/bin/python -m pytest -q -n 2 $(NEWEST_TESTS)
	$(NEWEST_VENV)/bin/python -m bookkit.book.execute --profile ci --out _build/nb/newest-python \
		--page book/hessian/single_layer.md

# The whole book as one PDF, printed by headless Chromium from a single-page HTML build of
# the executed pages (executes them first if this profile's tree is missing), then checked.
pdf: setup
	@test -d $(NB_DIR)/book || $(MAKE) --no-print-directory execute
	$(PY) -m bookkit.book.pdf --notebooks $(NB_DIR) --out _build/pdf/book.pdf

# JupyterLab in the book's environment; every page's markdown opens as a notebook (jupytext).
lab: setup
	$(PY) -m bookkit.book.lab

bench: setup
	$(PY) -m bookkit.bench --out book/_data/benchmarks.json

# The peer environment (optional: make test and make book never need it): PyTorch
# 2.13.0 (CPU) and curvlinops beside the book's own pins, Python 3.11 only, since the CPU wheel
# of torch 2.13.0 at hand is for 3.11 (elsewhere pip would fetch a CUDA build of several GB).
# Its lock, requirements-peers.lock, replaces the book's setuptools pin (torch needs >= 77.0.3).
PEERS_PYTHON ?= $(shell python3.11 -c '' 2>/dev/null && command -v python3.11)
PEERS_VENV := .venv-peers
PEERS_PY := $(PEERS_VENV)/bin/python
PEERS_STAMP := $(PEERS_VENV)/.installed

peers-setup:
	@if [ -z "$(PEERS_PYTHON)" ]; then \
		echo "peers: no python3.11 on PATH; the peer environment needs Python 3.11 (pass PEERS_PYTHON=/path/to/python3.11)" >&2; exit 1; fi
	@$(PEERS_PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "peers: $(PEERS_PYTHON) is Python %d.%d, the peer environment needs 3.11" % sys.version_info[:2])'
	@want=$$($(PEERS_PYTHON) -c 'import sys; print(sys.base_prefix, sys.version.split()[0])'); \
	have=$$($(PEERS_PY) -c 'import sys; print(sys.base_prefix, sys.version.split()[0])' 2>/dev/null); \
	if [ "$$want" != "$$have" ]; then \
		echo "peers: creating $(PEERS_VENV) with Python $${want##* } ($(PEERS_PYTHON))"; rm -rf $(PEERS_VENV); $(PEERS_PYTHON) -m venv $(PEERS_VENV); fi
	@$(MAKE) --no-print-directory $(PEERS_STAMP)

$(PEERS_STAMP): requirements.lock requirements-peers.lock pyproject.toml
	@echo "peers: installing requirements.lock and requirements-peers.lock into $(PEERS_VENV)"
	grep -v '^setuptools==' requirements.lock > $(PEERS_VENV)/book.lock
	$(PEERS_PY) -m pip install --quiet --disable-pip-version-check -r $(PEERS_VENV)/book.lock -r requirements-peers.lock
	$(PEERS_PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(PEERS_STAMP)

# The cross-framework tests (tests_peers/, never collected by `make unit`).
peers: peers-setup
	$(PEERS_PY) -m pytest tests_peers -q -n 2

# The growth-rate unit, PyTorch + curvlinops against ours in one run: book/_data/peers.json.
bench-peers: peers-setup
	nice -n 10 $(PEERS_PY) -m bookkit.peers.bench --out book/_data/peers.json $(BENCH_PEERS_ARGS)

clean:
	rm -rf _build
