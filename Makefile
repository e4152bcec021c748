# cloudseed: two commands set everything up on a fresh machine.
#   make run   - create .venv, install, migrate the embedded SQLite databases, serve
#   make test  - create .venv with the test extras and run the whole suite
#   make check - lint and the unit tests: the edit-test loop (under 2 minutes)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./var
PYTEST_ARGS ?=
# make test runs the suite in this many worker processes (pytest-xdist); 0: in pytest itself.
# Three on two cores: with two, a fifth of the CPU sat idle while tests waited on the servers,
# guests and tools they start (1,352 s of pytest with three against 1,836 s with two, the
# second run also with the one-process Nova deployment: docs/benchmarks.md, "CI run").
# --dist loadgroup takes tests/support/scheduling.py's scheduler (tests/conftest.py): one test
# at a time to whichever worker is free, but all of a Nova deployment's tests to one worker;
# 'load' sends each worker a quarter of its share at once, and the run ends with one worker
# alone on the slow tests it was sent: 2048 s of pytest against 2180 s.
TEST_JOBS ?= 3
# make check's unit tests only compute: one worker per core.
CHECK_JOBS ?= 2

.PHONY: help run test check venv test-venv lint lint-venv docs tempest fuzz soak bench bench-api-reads bench-metadata bench-login-keys bench-operations bench-hosts-apart bench-configdrive bench-longpoll bench-ack bench-nova bench-nova-dropin image-debian e2e clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# setuptools 77 reads pyproject's SPDX license; with it in the venv, cloudseed also installs
# without an index (PIP_NO_BUILD_ISOLATION, as tests/e2e/test_readme.py runs `make run`).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip 'setuptools>=77' wheel

# Each install is remembered by a stamp in the venv, newer than pyproject.toml: a second
# make run, test or e2e installs nothing (the install is editable: src/ is read in place).
# CI runs make test and make e2e side by side, and a pip install while a suite runs would
# take the package away from under the processes it starts (pip uninstalls, then installs).
INSTALLED := $(VENV)/.installed
TEST_INSTALLED := $(VENV)/.test-installed

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

venv: $(INSTALLED)  ## create the venv and install cloudseed

# bench: matplotlib, which tests/unit/test_bench_side_by_side.py draws a chart with.
$(TEST_INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

test-venv: $(TEST_INSTALLED)

run: venv  ## migrate the embedded SQLite databases and serve (compute API on 127.0.0.1:8774)
	$(BIN)/cloudseed --data-dir $(DATA_DIR) db sync
	$(BIN)/cloudseed --data-dir $(DATA_DIR) serve

test: test-venv  ## run the whole test suite (SQLite; PostgreSQL and MariaDB where reachable)
	sh tools/debian-packages.sh
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

tempest: test-venv  ## tempest 47's compute API tests at 2.104 and latest, behind a real Keystone (minutes; docs/tempest.md)
	$(BIN)/python tools/tempest.py --write docs/tempest.md

FUZZ_EXAMPLES ?= 300

fuzz: test-venv  ## the fuzzers of tests/functional/test_fuzz.py at length (minutes; docs/fuzzing.md)
	CLOUDSEED_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -p no:xdist -q \
		tests/functional/test_fuzz.py -k sqlite $(PYTEST_ARGS)

SOAK_MINUTES ?= 30
SOAK_GUESTS ?= 2000

# A private PostgreSQL cluster (initdb from /usr/lib/postgresql/*/bin; as root it runs as the
# postgres user), never the machine's own server. tests/functional/test_soak.py: the short run.
soak: test-venv  ## soak under faults: processes on PostgreSQL, load, SIGKILLs, a database restart (SOAK_MINUTES=30; docs/benchmarks.md)
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES) --guests $(SOAK_GUESTS) --write docs/benchmarks.md

# stdlib only: it reads src/cloudseed and pyproject.toml, imports nothing of cloudseed.
docs: venv  ## regenerate the module map (docs/architecture.md) and the options tables (docs/configuration.md)
	$(BIN)/python tools/architecture.py
	$(BIN)/python tools/options_table.py

LINT_PATHS := src tests bench clients tools

# mypy checks tests and bench too, so it needs their packages (pytest, httpx, matplotlib, ...).
lint: lint-venv  ## ruff format --check, ruff check, mypy --strict, import-linter (pinned: the lint extra)
	$(LINT_STEPS)

# make lint's checks, one command each (make stops at the first that fails).
define LINT_STEPS
$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
endef

# make lint and the edit-test loop install only when pyproject.toml changed since they last did
# (pip's editable reinstall would cost seconds on every run, and CI lints while make e2e runs).
CHECK_INSTALLED := $(VENV)/.check-installed

$(CHECK_INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench,lint]'
	touch $@

lint-venv: $(CHECK_INSTALLED)

# tests/unit needs no database server, no HTTP server and no guest. The functional, compat and
# e2e layers (minutes) stay with `make test`. On 2 busy cores: about 65 s, 85 s while mypy's
# first run fills .mypy_cache.
check: $(CHECK_INSTALLED)  ## make lint's checks and the unit tests (tests/unit): the edit-test loop, under 2 minutes
	$(LINT_STEPS)
	$(BIN)/python -m pytest -n $(CHECK_JOBS) -q tests/unit $(PYTEST_ARGS)

bench: test-venv  ## key pair benchmarks; results go to docs/benchmarks.md
	$(BIN)/python bench/keypairs.py --write docs/benchmarks.md

bench-api-reads: test-venv  ## key pair list/show, server show under wrk, import latency (about 1 minute)
	$(BIN)/python bench/api_reads.py --write docs/benchmarks.md

bench-metadata: venv  ## metadata boot storm (10,000 guests, wrk, nginx side by side, 2,000 servers built beside it as docs/deployment.md lays them out; minutes)
	sh tools/debian-packages.sh wrk nginx-light
	$(BIN)/pip install --quiet py-spy
	$(BIN)/python bench/metadata_storm.py --apart 10 --write docs/benchmarks.md

bench-login-keys: venv  ## authorized_keys under a storm of logins (2,000 guests, wrk; about 4 minutes)
	sh tools/debian-packages.sh wrk
	$(BIN)/python bench/login_keys.py --write docs/benchmarks.md

bench-operations: test-venv  ## operations and compute hosts on PostgreSQL (real processes; minutes)
	$(BIN)/python bench/operations.py --write docs/benchmarks.md

bench-hosts-apart: test-venv  ## image cache fill (2 GiB over loopback) and console mirror (10,000 guests, PostgreSQL); about 2 minutes
	$(BIN)/python bench/hosts_apart.py --write docs/benchmarks.md

bench-longpoll: test-venv  ## 10,000 waiting long-polls on 2 workers, SQLite then PostgreSQL (minutes each)
	$(BIN)/python bench/longpoll.py --database sqlite --write docs/benchmarks.md
	$(BIN)/python bench/longpoll.py --database postgresql --write docs/benchmarks.md

bench-ack: test-venv  ## lifecycle notices: an acknowledged event's operation start, 3 deployments (about 3 minutes)
	$(BIN)/python bench/ack_latency.py --write docs/benchmarks.md

bench-configdrive: venv  ## config drives built per second, in-process vs genisoimage (Nova's way)
	sh tools/debian-packages.sh
	$(BIN)/python bench/configdrive.py --write docs/benchmarks.md

bench-nova: test-venv  ## cloudseed beside real Nova 34 + Keystone (peers: ../shared/peers or CLOUDSEED_PEERS_DIR; minutes)
	sh tools/debian-packages.sh wrk nginx-light
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/side_by_side.py --only metadata --write docs/benchmarks.md
	$(BIN)/python bench/side_by_side.py --only api --write docs/benchmarks.md

bench-nova-dropin: test-venv  ## cloudseed nova-metadata beside Nova 34's metadata API (uwsgi, gunicorn) on one Nova deployment, 2,000 guests (PostgreSQL, else SQLite; ~20 minutes)
	sh tools/debian-packages.sh wrk nginx-light
	$(BIN)/python bench/nova_dropin.py --write docs/benchmarks.md

IMAGES_DIR ?= .cache/images

image-debian:  ## build a partitioned, GRUB-booting Debian 12 cloud image with cloud-init (root; ~4 min, cached)
	sh tools/e2e/packages.sh
	sh tools/debian-packages.sh
	tools/e2e/wait-quiet.sh
	tools/e2e/build-image.sh $(IMAGES_DIR)
	@echo "image: $(IMAGES_DIR)/debian-12-cloudseed.qcow2 (login user: debian)"
	@echo "register: cloudseed image add debian-12 --file $(IMAGES_DIR)/debian-12-cloudseed.qcow2 --disk-format qcow2 --property os_admin_user=debian"

e2e: test-venv image-debian  ## boot real guests under QEMU against a running cloudseed (root; minutes)
	CLOUDSEED_TEST_E2E_DIR=$(IMAGES_DIR) $(BIN)/python -m pytest tests/e2e -p no:xdist $(PYTEST_ARGS)

clean:  ## remove the venv and local data
	rm -rf $(VENV) $(DATA_DIR) .pytest_cache .hypothesis .ruff_cache .mypy_cache
