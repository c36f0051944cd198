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

.PHONY: venv test test-fast test-postgres postgres browser lint demo stop build-world reload clean-venv

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

# The suite in parallel workers (pytest-xdist): a module's tests (and so its e2e game server)
# stay in one worker, and modules are handed out in the suite's order (the e2e ones first).
TEST_WORKERS ?= 2
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: venv
	$(VPY) -m pytest $(PARALLEL) $(PYTEST_ARGS)

# The suite again with Evennia's database on a real PostgreSQL: a throwaway cluster in a temp
# folder on a free loopback port (tests/postgres.py). Installs Debian's postgresql if missing.
test-postgres: venv postgres
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

test-fast: venv
	$(VPY) -m pytest $(PARALLEL) -m "not e2e" $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check ai_assistant tests bench

demo: venv
	$(EVENNIA) migrate
	$(EVENNIA) start
	@echo
	@echo "Ada is in Limbo. Connect: telnet 127.0.0.1 4000 (web: http://127.0.0.1:4001)"
	@echo "Superuser: $(EVENNIA_SUPERUSER_USERNAME) / $(EVENNIA_SUPERUSER_PASSWORD)"

reload: venv
	$(EVENNIA) reload

stop:
	@if [ -x $(EVENNIA) ]; then $(EVENNIA) stop; else echo "nothing to stop (no $(VENV))"; fi

clean-venv:
	rm -rf $(VENV)
