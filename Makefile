# Every target creates .venv on first use; only Python 3.11+ and make are assumed.
# `make run` installs only what the server needs; `make test` adds the test and lint tools.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Every install is held to the layer's lock (the versions the tests ran with and the Lambda
# layer ships): a fresh clone gets those, not whatever was released since, and
# tests/aws/test_layer.py, which compares the two, stays true on any date.
LOCK   := layers/claros_common/requirements.txt
PIP    := $(BIN)/python -m pip install -q --disable-pip-version-check -c $(LOCK)
RUN_STAMP  := $(VENV)/.installed-server
TEST_STAMP := $(VENV)/.installed-dev

# Test processes (pytest-xdist): 4 by default. Many tests wait on subprocesses (guards,
# servers, a browser, a wheel build), so 4 processes pay on 2 cores: the whole suite
# took ~20 min here at -n 4 against ~35-41 min in one process. Tests that share a
# fixture wider than one test stay on one worker (tests/conftest.py). That grouping
# needs pytest below 9.2: pytest 9.2 drops xdist's '@group' suffix (pytest-xdist issue
# 1386), every file's tests were spread and module fixtures built once per worker;
# pyproject.toml pins it and tests/conftest.py fails a grouped test whose group was
# lost. pytest 9.1 is kept out too: given files of two folders interleaved
# (tests/api/a.py tests/b.py tests/api/c.py) it lost tests/api's conftest fixtures for
# the last (pytest issue 14971). `make test TEST_WORKERS=0` runs everything in this one process. The byte-code
# cache is on for the tests: they start hundreds of Python subprocesses (guards, hooks,
# the CLI), each of which would otherwise compile Claros again.
TEST_WORKERS ?= 4

CLAROS_PORT ?= 8787
CLAROS_DATA ?= .claros

.PHONY: run test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is needed" or 0)'
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP) -e '.[server]'
	touch $(RUN_STAMP)

# One install for the tests: the dev extra holds the server extra, so a fresh clone
# resolves and builds the editable package once (two installs cost ~10 s of CPU more),
# and the server's stamp is then current too. A venv `make run` made gets the rest.
$(TEST_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $(RUN_STAMP) $(TEST_STAMP)

run: $(RUN_STAMP)
	CLAROS_PORT=$(CLAROS_PORT) CLAROS_DATA=$(CLAROS_DATA) $(BIN)/python -m claros.demo

test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(TEST_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .claros .aws-sam
