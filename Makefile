# The README's commands. `make test` is what CI runs (.ci/run).
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
DEMO_ARGS ?=
CHAOS_ARGS ?=
BACKEND ?= file
FUZZ_SECONDS ?= 60
SOAK_MINUTES ?= 30
SOAK_ARGS ?=

PG_VERSIONS ?= 13 14 15 16 17 18
# Caches every checkout on this machine shares (a fresh clone, as CI makes, then checks and
# compiles only what differs from the last one): mypy's, and the Rust tests' and clippy's
# build of the crates.
CACHE_DIR ?= $(HOME)/.cache/distributary
MYPY := MYPY_CACHE_DIR="$(CACHE_DIR)/mypy" $(BIN)/mypy

.PHONY: setup demo test test-matrix native-test native-checks lint typecheck unit integration bench bench-log bench-capture bench-json bench-spark bench-lakehouse bench-rebuild bench-snapshot bench-tables bench-reconcile bench-failover bench-joins bench-pipeline chaos soak clean

setup:
	@CACHE_DIR="$(CACHE_DIR)" bash compose/setup.sh

demo: setup
	$(BIN)/python -m compose.demo $(DEMO_ARGS)

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(MYPY)

unit: setup
	$(BIN)/pytest tests/unit -q $(PYTEST_ARGS)

integration: setup
	$(BIN)/pytest tests/integration -q $(PYTEST_ARGS)

# The capture's minute of DDL against a streaming capture is shortened here (the whole
# suite must stay under 30 minutes); make test-matrix runs it for the full minute. The native
# core's Rust tests, then the unit tests (then a few integration groups), run beside the
# integration tests (compose/run_tests.sh).
test: export SETUP_CLASS_ARCHIVE = later
test: setup
	$(BIN)/ruff check .
	$(MYPY)
	DISTRIBUTARY_DDL_RACE_S=$${DISTRIBUTARY_DDL_RACE_S:-20} \
	  NATIVE_CHECKS="make --no-print-directory native-checks" \
	  bash compose/run_tests.sh $(PYTEST_ARGS)

# The capture, codec, snapshot and schema-change integration tests on every PostgreSQL
# major version (make test runs a smoke subset of them on the versions besides 15).
test-matrix: setup
	@for v in $(PG_VERSIONS); do echo "== PostgreSQL $$v"; \
	  DISTRIBUTARY_TEST_PG_VERSION=$$v $(BIN)/pytest -q $(PYTEST_ARGS) tests/integration/capture \
	    tests/integration/fidelity tests/integration/test_type_codecs.py \
	    tests/integration/test_smoke_replication.py || exit 1; done

# The native core's Rust unit tests and clippy (their build is kept in CACHE_DIR);
# native-checks: the same without set-up (make test runs it once set up).
native-test: setup
	@$(MAKE) --no-print-directory native-checks

native-checks:
	cd native && PATH="$$PATH:$$HOME/.cargo/bin" PYO3_PYTHON="$(CURDIR)/$(BIN)/python" \
	  CARGO_TARGET_DIR="$(CACHE_DIR)/cargo-target" \
	  sh -c 'cargo test --quiet && if cargo clippy --version >/dev/null 2>&1; then \
	    cargo clippy --quiet --all-targets -- -D warnings; else echo "clippy not installed: skipped"; fi'

bench-log: setup
	$(BIN)/python -m bench.log_append

bench-capture: setup
	$(BIN)/python -m bench.capture

bench-json: setup
	$(BIN)/python -m bench.json_codec

bench-sinks: setup
	$(BIN)/python -m bench.sinks

bench-latency: setup
	$(BIN)/python -m bench.latency

bench-pipeline: setup
	$(BIN)/python -m bench.pipeline

bench-spark: setup
	$(BIN)/python -m bench.spark

# a Delta table of a 3 M-event log, then MERGEd with 100 k events more (one session)
bench-lakehouse: setup
	$(BIN)/python -m bench.lakehouse

# rebuild-search / rebuild-cache written by the executors vs plain foreachPartition writers
# (BENCH_SCALE scales the 3 M-event log)
bench-rebuild: setup
	$(BIN)/python -m bench.rebuild

bench-snapshot: setup
	$(BIN)/python -m bench.snapshot

# cdc reconcile of a 1 M-row table (BENCH_SCALE scales it) vs COPY + scroll + SCAN/MGET
bench-failover: setup
	$(BIN)/python -m bench.failover

bench-reconcile: setup
	$(BIN)/python -m bench.reconcile

# 2,000 tables x 3 partitions under ulimit -n 1024 (BENCH_TABLES, BENCH_SCALE scale it)
bench-tables: setup
	$(BIN)/python -m bench.tables

# joined views (orders + customer + items + product) through cdc run vs SQL + helpers.bulk
# (BENCH_JOINS_SCALE scales 100 k customers, 1 M orders, 3 M items)
bench-joins: setup
	$(BIN)/python -m bench.joins

bench: bench-json bench-log bench-capture bench-sinks bench-latency bench-pipeline bench-spark bench-lakehouse bench-rebuild bench-snapshot bench-tables

# The pgoutput decoder, then the native core's entry points against their Python
# reference, fuzzed for FUZZ_SECONDS in all (atheris; half each), then the whole pipeline under
# faults (python -m chaos; CHAOS_ARGS="--short" for the quick version). Needs root for the
# log's tmpfs. BACKEND=kafka runs it on a local 3-broker Kafka cluster with two capture
# replicas, adding faults: the streaming replica stalled (SIGSTOP/SIGCONT), a broker killed.
chaos: setup
	$(BIN)/python -m chaos.fuzz_pgoutput -max_total_time=$$(( ($(FUZZ_SECONDS) + 1) / 2 ))
	$(BIN)/python -m chaos.fuzz_native -max_total_time=$$(( ($(FUZZ_SECONDS) + 1) / 2 ))
	$(BIN)/python -m chaos --backend $(BACKEND) $(CHAOS_ARGS)

# cdc run for SOAK_MINUTES under a steady 5,000 rows/s with outages of each sink, a killed
# connector and a PostgreSQL restart; samples and a chart in soak-results/ (python -m soak).
soak: setup
	$(BIN)/pip install -q -r soak/requirements.txt
	$(BIN)/python -m soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The download cache (jars, PostgreSQL builds; /var/cache/distributary, shared by every
# clone, or .cache/ or $DISTRIBUTARY_CACHE) is kept: remove it by hand to download again.
clean:
	rm -rf .data .pytest_cache .mypy_cache .ruff_cache distributary.egg-info
