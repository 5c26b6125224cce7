# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CACHE := .cache
MVN := mvn -q -B -f infra/pom.xml -Dmaven.repo.local=$(CURDIR)/$(CACHE)/m2

.PHONY: setup installed system-packages jars servers marquez-api marquez-web venv engine demo docs lint test test-all suite test-unit test-fast dev stack-up stack-down stack-status flink-peer connect-peer bench bench-quick clean

# Two steps at a time where neither needs the other: Marquez's web UI (npm and webpack, the longest
# step) builds while Maven fetches the jars and builds Marquez's API, and `make test` lints meanwhile.
TWO_AT_A_TIME := --no-print-directory -j2 --output-sync=target
setup:
	@$(MAKE) $(TWO_AT_A_TIME) installed
installed: system-packages $(BIN)/lineage-assets jars servers

# PostgreSQL, Chromium (lineage pictures, browser tests) and nginx (the tls profile's proxy) come from
# Debian; the rest from PyPI, Maven Central and npm.
SUDO := $(shell [ $$(id -u) -eq 0 ] || echo sudo)
system-packages:
	@missing=""; \
	test -x /usr/lib/postgresql/15/bin/postgres || missing="$$missing postgresql-15"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	if [ -n "$$missing" ]; then \
	  echo "installing from Debian:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@command -v java >/dev/null || { echo "setup: java not found; install a Java 17 runtime"; exit 1; }
	@command -v mvn >/dev/null || { echo "setup: mvn not found; install Maven"; exit 1; }
	@command -v npm >/dev/null || { echo "setup: npm not found; install Node.js 18 or later (builds Marquez's web UI)"; exit 1; }

$(BIN)/lineage-assets: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench]'
	@touch $@

# Resolved once into the project-local cache; later runs find the stamp and stay offline.
jars: $(CACHE)/jars/.resolved
JAR_PROFILES := spark kafka iceberg-rest servers
$(CACHE)/jars/.resolved: infra/pom.xml
	@for profile in $(JAR_PROFILES); do \
	  echo "resolving jars: $$profile"; \
	  $(MVN) package -P $$profile -Djars.dir=$(CURDIR)/$(CACHE)/jars || exit 1; \
	done
	@touch $@

# Servers built from source (Marquez's API with Maven, its web UI with npm) into $(CACHE); each
# service checks its own stamp, so this is quick and offline once built.
servers: marquez-web marquez-api
	$(BIN)/lineage-assets stack build
marquez-web: $(BIN)/lineage-assets
	$(BIN)/lineage-assets stack build marquez-web
marquez-api: $(BIN)/lineage-assets jars
	$(BIN)/lineage-assets stack build marquez

# A Docker engine for the docker deployment backend, the container profile and the stack as
# containers: the machine's own when `docker info` answers; otherwise Debian's docker.io, which the
# stack runs (`lineage-assets stack up docker`: no bridge, no iptables, images under $(CACHE)/docker),
# and mmdebstrap, which builds the base image from the Debian mirror when no registry answers. Compose
# (infra/compose.yaml): the machine's `docker compose` or `docker-compose`, else Debian's docker-compose.
engine: setup
	@docker info >/dev/null 2>&1 || { command -v dockerd >/dev/null && command -v mmdebstrap >/dev/null; } || { \
	  echo "installing from Debian: docker.io mmdebstrap"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io mmdebstrap >/dev/null; }
	@docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || { \
	  echo "installing from Debian: docker-compose"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; }

# `make demo CONTINUOUS=1` also leaves the three streaming jobs deployed in continuous mode.
# `make demo CONTAINERS=1`, `make dev CONTAINERS=1`: the container profile. The streaming jobs are
# deployed as containers of the project's image (the demo deploys them), and `make dev` launches each
# Dagster run in a container (dagster-docker's DockerRunLauncher), on the engine `make engine` provides.
ifdef CONTAINERS
export LINEAGE_ASSETS_DEPLOYMENT_BACKEND := docker
export LINEAGE_ASSETS_RUN_LAUNCHER := docker
CONTAINER_ENGINE := engine
CONTINUOUS := 1
endif
demo: setup $(CONTAINER_ENGINE)
	$(BIN)/lineage-assets demo $(if $(CONTINUOUS),--continuous)

# The pictures in docs/, drawn on a fresh stack of their own (state .state/docs, ports shifted by 3000).
docs: setup
	$(BIN)/python docs/pictures.py

# ruff over everything the repository holds, then mypy over lineage_assets/, spark/ and bench/ (both
# configured in pyproject.toml), before the suite.
LINT_PATHS ?= .
lint: $(BIN)/lineage-assets
	$(BIN)/ruff check --config pyproject.toml $(LINT_PATHS)
	$(BIN)/ruff format --check --config pyproject.toml $(LINT_PATHS)
	$(BIN)/mypy

# The suite under coverage.py (settings in pyproject.toml), then the figure against its floor. Three
# workers on two cores, each running whole groups of tests (tests/suite.py says which): the tests wait
# on servers, schedule ticks and browsers, and the third keeps both cores busy meanwhile; the 25 slowest
# set-ups and calls are listed, what to shorten first when CI nears its time budget. `make test`, what
# CI runs, leaves out the three profiles that bring a stack of their own (the tls profile; a Docker
# engine and the project's image; three brokers and a Spark cluster); `make test-all` runs every tier.
COVERAGE := COVERAGE_FILE=$(CURDIR)/.coverage $(BIN)/coverage
WORKERS ?= 3
PARALLEL := -n $(WORKERS) --dist loadgroup --no-loadscope-reorder
PROFILES := secured or docker or cluster
test:
	@$(MAKE) $(TWO_AT_A_TIME) installed lint
	@$(MAKE) --no-print-directory suite TIERS="not ($(PROFILES))"
test-all: setup lint engine
	@$(MAKE) --no-print-directory suite TIERS=""
suite:
	@rm -f .coverage .coverage.*
	$(COVERAGE) run -m pytest -q -ra --durations=25 $(PARALLEL) $(if $(TIERS),-m "$(TIERS)")
	$(COVERAGE) combine -q
	$(COVERAGE) report --skip-covered --sort=cover

test-unit: setup
	$(BIN)/pytest -q -ra tests/unit

# The pure tier: every test that starts no JVM, no server, no container and no browser (tiers: pyproject.toml).
PURE := not (spark or stack or cluster or secured or docker or browser)
test-fast: $(BIN)/lineage-assets
	$(BIN)/pytest -q -ra -m "$(PURE)" $(PARALLEL)

# Same Dagster instance as `make demo`, so its runs show in the UI.
dev: setup $(CONTAINER_ENGINE) stack-up
	$(BIN)/lineage-assets dev

stack-up: setup
	$(BIN)/lineage-assets stack up

stack-down:
	@test -x $(BIN)/lineage-assets && $(BIN)/lineage-assets stack down || true

stack-status:
	$(BIN)/lineage-assets stack status

# The benchmarks' Flink peers (bench/flink_ingestion.py, bench/flink_supplier_stats.py): PyFlink in an interpreter of its own, and
# its connector jars; only the benchmarks need them.
FLINK_PEER := $(CACHE)/flink-peer
flink-peer: $(FLINK_PEER)/.installed $(CACHE)/jars/.flink-peer-resolved
$(FLINK_PEER)/.installed: pyproject.toml
	@test -x $(FLINK_PEER)/bin/python || $(PYTHON) -m venv $(FLINK_PEER)
	$(FLINK_PEER)/bin/pip install -q --upgrade pip
	$(FLINK_PEER)/bin/pip install -q --group pyproject.toml:flink-peer
	@touch $@
$(CACHE)/jars/.flink-peer-resolved: infra/pom.xml
	$(MVN) package -P flink-peer -Djars.dir=$(CURDIR)/$(CACHE)/jars
	@touch $@

# The benchmarks' Kafka Connect peers (bench/connect_peer.py): Kafka's Connect runtime and one plugin
# folder per connector (Connect's plugin.path), from infra/pom.xml's kafka-connect profiles.
CONNECT_PROFILES := kafka-connect kafka-connect-iceberg kafka-connect-camel-s3
connect-peer: $(CACHE)/jars/.connect-peer-resolved
$(CACHE)/jars/.connect-peer-resolved: infra/pom.xml
	@for profile in $(CONNECT_PROFILES); do \
	  echo "resolving jars: $$profile"; \
	  $(MVN) package -P $$profile -Djars.dir=$(CURDIR)/$(CACHE)/jars || exit 1; \
	done
	@touch $@

# Benchmarks (their own stack on ports shifted by 10600); results in bench/results/latest.{json,md,png}.
bench: setup flink-peer connect-peer
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m bench.run

bench-quick: setup flink-peer connect-peer
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m bench.run --quick

clean: stack-down
	rm -rf .state
