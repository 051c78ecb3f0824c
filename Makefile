# Statekeeper: one entry point for setup, the demo (main job on the embedded default), tests and benchmarks.
# Everything is idempotent: a second run reuses .venv and the download caches.

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
UV     := $(VENV)/bin/uv
# Caches live outside the repository so a fresh clone reuses them (Flink jars, uv wheels, fixtures).
export STATEKEEPER_CACHE ?= $(HOME)/.cache/statekeeper
export UV_CACHE_DIR ?= $(HOME)/.cache/uv
# No __pycache__ in the checkout; the venv's packages are byte-compiled once at install instead
# (--compile-bytecode), else every Spark Python worker and spark-submit recompiles pandas, pyarrow and
# Airflow from source: measured 2.1 s -> 0.8 s for `import pandas, pyarrow, deltalake, pyspark.sql`.
export PYTHONDONTWRITEBYTECODE = 1
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha1sum | cut -c1-12)
# Azurite (the Azure Blob emulator the azure-marked tests start) from npm, pinned, in the cache outside the
# repository; installed only when missing. tests/plugins/object_stores.py reads this version from here.
AZURITE_VERSION := 3.37.0
AZURITE_DIR := $(STATEKEEPER_CACHE)/npm/azurite-$(AZURITE_VERSION)
AZURITE := $(AZURITE_DIR)/node_modules/.bin/azurite-blob

.PHONY: setup system-packages azurite jvm-parts test-deps demo test test-unit test-fast test-full bench airflow-ui clean help
help:
	@echo "make demo   - set up, generate a sample store with real Flink, run the main job on it"
	@echo "make test   - set up and run the whole test suite"
	@echo "make test-unit - only the unit tier (-m unit: no JVM, Spark, S3 server or Airflow; under a minute)"
	@echo "make test-fast - everything but the real-Flink and slow tests (-m \"not slow and not flink\"): unit, Spark, moto S3, Airflow"
	@echo "make test-full - make test plus the full_matrix tests (every harness Flink version everywhere, every crash kill point): nightly, release"
	@echo "make bench  - run the benchmarks (prints ratios against a same-run baseline)"
	@echo "make airflow-ui - the Airflow UI on http://127.0.0.1:8080 with the project's DAGs (Ctrl-C stops it)"
	@echo "make setup  - only create/refresh $(VENV) from requirements.lock"

setup: system-packages $(STAMP) azurite jvm-parts

# The JVM parts every Spark job runs with (Delta Lake for Spark, S3A), resolved once by mvn from Maven Central into
# the cache and installed, verified against their pinned sha256, into the venv (statekeeper.launch.jars).
jvm-parts: $(STAMP)
	@$(PY) -m statekeeper.launch.jars

azurite: $(AZURITE)
$(AZURITE):
	@command -v npm >/dev/null 2>&1 || { echo "make setup: npm (Node.js 20 or newer) is needed to install the Azurite emulator" >&2; exit 1; }
	@echo "installing azurite $(AZURITE_VERSION) from npm into $(AZURITE_DIR)"
	@mkdir -p $(AZURITE_DIR)
	@npm install --prefix $(AZURITE_DIR) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION) >/dev/null
	@test -x $@

# Debian packages the Python ones cannot bring: Graphviz's `dot` (the report's lineage layout) and Chromium with
# its matching driver (the browser test; one source package, so the two never disagree), and Maven, which
# resolves the JVM parts (statekeeper.launch.jars). Only what is missing is
# installed; elsewhere set STATEKEEPER_SKIP_SYSTEM_PACKAGES=1 and install the equivalents yourself.
SYSTEM_PACKAGES := graphviz:dot chromium:chromium chromium-driver:chromedriver maven:mvn
# Prometheus 2.42 (with promtool) and its Pushgateway 1.5, for the metrics tests: they start both on free loopback
# ports with data of their own (tests/plugins/prometheus.py), never the Debian services (which a machine whose init
# starts services would run on 9090/9091; nothing of the project uses them). Without recommends: those are more
# exporters, each a service of its own.
SYSTEM_PACKAGES_LEAN := prometheus:promtool prometheus-pushgateway:prometheus-pushgateway
# $(call apt_install,PACKAGE:BINARY ...,EXTRA apt-get OPTIONS): install the packages whose binary is missing.
define apt_install
missing=""; for p in $(1); do command -v $${p#*:} >/dev/null 2>&1 || missing="$$missing $${p%%:*}"; done; \
if [ -n "$$missing" ] && [ -z "$$STATEKEEPER_SKIP_SYSTEM_PACKAGES" ]; then \
  if ! command -v apt-get >/dev/null 2>&1; then \
    echo "make setup: missing system packages:$$missing; install them (or set STATEKEEPER_SKIP_SYSTEM_PACKAGES=1)" >&2; exit 1; fi; \
  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
  echo "installing Debian packages:$$missing"; \
  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q $(2) $$missing >/dev/null \
    || { DEBIAN_FRONTEND=noninteractive $$sudo apt-get update -q >/dev/null && \
         DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q $(2) $$missing >/dev/null; }; \
fi
endef
system-packages:
	@$(call apt_install,$(SYSTEM_PACKAGES),)
	@$(call apt_install,$(SYSTEM_PACKAGES_LEAN),--no-install-recommends)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# A venv made by uv (or without pip) gets pip from ensurepip first.
	@test -x $(UV) || { $(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip >/dev/null; $(PY) -m pip install -q uv==0.13.9; }
	@# Offline first: online, uv re-fetches the pyspark sdist from this index on every install, rebuilds it (~20 s)
	@# and keeps each build as a new cache revision, about 1 GB each; fresh clones on a shared machine filled its disk
	@# that way (CI: "No space left on device"). The offline install takes the cached build; only a cold or
	@# incomplete cache goes online, and `uv cache prune` then drops the revisions nothing uses any more.
	$(UV) pip install -q --offline --compile-bytecode --python $(PY) -r requirements.lock 2>/dev/null \
	  || { echo "uv cache incomplete for requirements.lock: installing online"; \
	       $(UV) pip install -q --compile-bytecode --python $(PY) -r requirements.lock && $(UV) cache prune -q; }
	$(UV) pip install -q --python $(PY) --no-deps -e .
	@rm -f $(VENV)/.installed-* && touch $@

# The demo's sample store is written by the harness's Flink 2.3.0 (statekeeper.dev.demo.DEMO_FLINK_VERSION): fetched
# here, before the demo runs, so the demo itself downloads nothing.
demo: setup
	STATEKEEPER_FLINK_VERSIONS=2.3.0 $(PY) -m tests.harness.prefetch --no-s3-plugin
	$(PY) -m statekeeper.dev.demo

# The wall time of the whole target (setup included) is printed last, against the budget in tests/README.md;
# pytest's own last lines (tests/plugins/budget.py) give the slowest tests and modules.
MAKE_T0 := $(shell date +%s)
# TEST_WORKERS=2 (the default): two pytest workers, each running whole modules (--dist loadfile: a module's
# fixtures stay in one process). The whole suite on this 2-core machine: 61:23 of pytest in one process (ca5474c),
# 51:53 with two (e42e3d8, which added one test module); two take the idle time of one process's waits, the CPU stays.
# Three (e5d201a): make test 41:49 against 43:23 with two, the CPU 98% busy throughout (vmstat): the suite is CPU-bound,
# a third worker only shifts the tail; what shortens it is less CPU per test.
# TEST_WORKERS=0 runs one process (to bisect an interaction between modules).
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)
test: setup test-deps
	@rc=0; $(PY) -m pytest $(XDIST) $(PYTEST_ARGS) || rc=$$?; t=$$(( $$(date +%s) - $(MAKE_T0) )); \
	echo "make test: $$((t / 60))m$$((t % 60))s wall, setup included (budget on 2 cores: 30 min warm, 40 min cold)"; \
	exit $$rc

# What the tests' real Flink needs, fetched once before any test runs (nothing downloads at test time): each
# harness version's Flink from PyPI and the S3 filesystem plugin from Maven Central, into $(STATEKEEPER_CACHE).
test-deps: setup
	$(PY) -m tests.harness.prefetch

# Tiers by marker (tests/conftest.py adds flink/s3/spark/airflow/cluster from the fixtures a test uses, and
# `unit` when it has none of them and is not slow). PYTEST_ARGS still applies, e.g. a folder.
test-unit: setup
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

test-fast: setup test-deps
	$(PY) -m pytest -m "not slow and not flink" $(PYTEST_ARGS)

test-full: setup test-deps
	$(PY) -m pytest --full-matrix $(XDIST) $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench $(BENCH_ARGS)

airflow-ui: setup
	$(PY) -m statekeeper.dev.airflow_local

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
