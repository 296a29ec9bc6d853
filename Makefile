# Developer and CI entry points. `make run` serves the demo; `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help venv deps chromium agent-server run test soak lint format bench

help:
	@echo "make run    install, migrate, seed demo data, serve on http://127.0.0.1:$${PORT:-8000}/"
	@echo "make test   install (incl. Debian chromium) and run the whole test suite"
	@echo "make soak   long randomized runs: the lifecycle state machine (profile soak) and the chaos test"
	@echo "make lint   ruff check + ruff format --check"
	@echo "make bench  run the benchmarks in bench/"

# The console itself installs no package of its own: the venv gets the pinned dependencies
# (runtime + dev) listed in pyproject.toml, and re-installs whenever that file changes.
# bin/requirements.py lists them; the Dockerfile installs its runtime part the same way.
# Then the Python client (clients/python, with its langchain extra), editable, for its tests
# and examples/remote_agent; its dependencies are among the pinned ones, so nothing is fetched.
$(INSTALLED): pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) bin/requirements.py --dev > $(VENV)/requirements.txt
	$(VENV)/bin/pip install --disable-pip-version-check -q -r $(VENV)/requirements.txt
	$(VENV)/bin/pip install --disable-pip-version-check -q --no-build-isolation \
		-e 'clients/python[langchain]'
	touch $@

venv: $(INSTALLED)

# Browser tests drive Debian's chromium (never a downloaded browser build).
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# The local LangGraph Agent Server the connector tests start (`langgraph dev`), in its own venv:
# langgraph-api pins jsonschema-rs<0.45, schemathesis needs >=0.60 (tests/fixtures/agent_server/).
AGENT_SERVER_VENV := .venv-agent-server
$(AGENT_SERVER_VENV)/.installed: tests/fixtures/agent_server/requirements.txt
	test -x $(AGENT_SERVER_VENV)/bin/python || $(PYTHON) -m venv $(AGENT_SERVER_VENV)
	$(AGENT_SERVER_VENV)/bin/pip install --disable-pip-version-check -q -r $<
	touch $@

agent-server: $(AGENT_SERVER_VENV)/.installed

deps: venv chromium agent-server

# The container's commands (bin/console, the image's entry point), on the venv's Python.
CONSOLE := CONSOLE_PYTHON=$(CURDIR)/$(PY) bin/console

run: venv
	$(CONSOLE) migrate
	$(CONSOLE) static
	$(CONSOLE) demo
	$(CONSOLE) serve

# collectstatic first: the real web servers that some tests start serve var/staticfiles.
test: deps
	$(PY) manage.py collectstatic --noinput -v 0
	$(VENV)/bin/pytest

# The "soak" hypothesis profile (tests/support/hypothesis_profiles.py): many more, random
# examples than the "ci" default, plus the chaos test that kills real workers.
soak: venv
	$(PY) manage.py collectstatic --noinput -v 0
	HYPOTHESIS_PROFILE=soak $(VENV)/bin/pytest tests/agents/trust/test_lifecycle_machine.py tests/durability/test_chaos.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Every benchmark script in bench/ (datagen.py and report.py are their shared helpers). Each
# prints its figures beside an anchor measured in the same run; BENCH_ONLY=name runs one.
bench: venv
	@set -e; for script in bench/*.py; do \
	  case $$script in bench/__init__.py|bench/datagen.py|bench/report.py) continue;; esac; \
	  case "$$BENCH_ONLY" in ""|*$$(basename $$script .py)*) ;; *) continue;; esac; \
	  echo "== $$script"; $(PY) $$script; done
