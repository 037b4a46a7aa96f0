# gpucloud: `make run` serves the embedded default on http://127.0.0.1:8000; `make serve` runs the production
# processes on PostgreSQL and Redis (DATABASE_URL, CELERY_BROKER_URL); `make test` runs every check.
VENV ?= .venv
ADDR ?= 127.0.0.1:8000
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip --disable-pip-version-check -q
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run serve test lint install-run install-test screenshots terraform-provider

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.run-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[dev,bench]'
	bash scripts/install-test-tools.sh
	touch $@

$(VENV)/.terraform-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[terraform]'
	touch $@

install-run: $(VENV)/.run-installed
install-test: $(VENV)/.test-installed

run: install-run
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py bootstrap --addr $(ADDR)
	$(PY) manage.py serve_embedded --addr $(ADDR)

serve: install-run
	GPUCLOUD=$(VENV)/bin/gpucloud bash scripts/serve.sh

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) manage.py makemigrations --check --dry-run

# The Terraform provider as a filesystem mirror under var/terraform/; prints the export that makes terraform use it.
terraform-provider: $(VENV)/.terraform-installed
	@$(PY) -m terraform_provider.build var/terraform

# The suite runs in PYTEST_WORKERS processes (pytest-xdist). tests/fixtures.py gives each its own databases,
# Redis database and var/, keeps the tests sharing a module fixture together and hands the slow ones out
# first. Much of the suite waits on processes, HTTP and PostgreSQL, so more processes than cores pay off.
# PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 4
test: lint
	bash scripts/with-services.sh $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	  $(PYTEST_ARGS)

# The portal's browser tests, saving their screenshots where the README shows them.
screenshots: install-test
	GPUCLOUD_SCREENSHOTS=$(CURDIR)/docs/screenshots bash scripts/with-services.sh $(VENV)/bin/pytest tests/test_portal_browser.py tests/test_gitops_browser.py clusters/tests/test_observed_workloads.py
