#!/usr/bin/env bash
# make test's pytest step, in two streams that share the machine's cores (the integration
# tests spend much of their time waiting on servers):
#   - the integration tests, but for the ones listed in BESIDE;
#   - beside them, the native core's checks, the unit tests, then the BESIDE ones:
#     self-contained groups that start what they need (Spark jobs, package installs, the
#     short chaos runs); the streams
#     are balanced by their durations (on this 2-core machine, 2026-11-30: integration
#     27:30 against unit 3:16 + Spark and packaging 19:30 before the chaos runs, ~2:40,
#     moved beside; then the cluster's Spark jobs cut from 9 to 5: integration 24:40
#     against unit 3:01 + 24:10 with the joined views' random workloads beside, ~1:30,
#     which went back; 2026-11-30, later: integration 26:42 against unit 3:37 + 21:08,
#     and the secret-leak sweep, ~1:20, moved beside; 2026-12-01, with the native core's
#     checks beside too: integration 26:26 against 0:30 + 3:48 + 21:29, and the schema
#     change's Spark job, ~0:17, moved beside, where the shared Spark session runs;
#     2026-12-02: integration 24:05 against 0:30 + 2:28 + 23:41; then the columnar
#     tests' Spark jobs ~2–3 min shorter, the joined views' Spark rebuild, ~1:20 of the
#     integration stream with its own Spark JVM, moved beside (~0:40 there), and the
#     secret-leak sweep, ~1:00, back).
# The second stream's report is printed after the first's. Fails if any run fails.
# Arguments are passed to every run (PYTEST_ARGS). NATIVE_CHECKS, when set, is a command
# the second stream runs first (make test: the native core's cargo test and clippy).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=.venv/bin/pytest

# The tests' JVMs (Spark's driver, Kafka, OpenSearch) compile with C1 only: each lives
# seconds to minutes, and C2's compilations took about half of their CPU (a small Spark
# job: 11 s of CPU against 5.5 s; an OpenSearch start: 10.8 s against 5.7 s), on a machine
# the two streams keep busy. The benchmarks and users' servers keep the JVM's default.
QUICK_JVM="-XX:TieredStopAtLevel=1"
export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }$QUICK_JVM"
export SPARK_LAUNCHER_OPTS="${SPARK_LAUNCHER_OPTS:+$SPARK_LAUNCHER_OPTS }$QUICK_JVM"
export DISTRIBUTARY_SERVER_JVM_OPTIONS="${DISTRIBUTARY_SERVER_JVM_OPTIONS:+$DISTRIBUTARY_SERVER_JVM_OPTIONS }$QUICK_JVM"
BESIDE=(tests/integration/spark tests/integration/capture/test_schema_spark.py
        tests/integration/packaging tests/integration/chaos/test_chaos_short.py)

# The Spark jobs' class archive (make setup's last step; `make test` leaves it to here when
# SETUP_CLASS_ARCHIVE=later): built beside the first tests, none of which needs it, and
# it is only a speed-up (a job started before it is in place starts without it).
archive_log=$(mktemp -t distributary-class-archive-XXXXXX.log)
.venv/bin/python -m cdc.cli replay class-archive >"$archive_log" 2>&1 &
archive_pid=$!

ignored=()
for path in "${BESIDE[@]}"; do ignored+=("--ignore=$path"); done

# 5: nothing collected (e.g. PYTEST_ARGS="-k …" picks tests of another run only)
collected() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

beside_report=$(mktemp -t distributary-beside-XXXXXX.log)
trap 'kill "$archive_pid" 2>/dev/null; rm -f "$beside_report" "$archive_log"' EXIT
(
    if [ -n "${NATIVE_CHECKS:-}" ]; then
        echo "== the native core's checks: $NATIVE_CHECKS"
        if ! $NATIVE_CHECKS; then
            echo "the native core's checks failed"
            exit 1
        fi
    fi
    "$PYTEST" tests/unit -q "$@"
    unit=$?
    echo "== integration tests run beside (${BESIDE[*]})"
    "$PYTEST" "${BESIDE[@]}" -q --durations=10 "$@"
    beside=$?
    echo "unit tests exit $unit, integration tests beside exit $beside"
    [ "$unit" -ne 0 ] && [ "$unit" -ne 5 ] && exit 1
    [ "$beside" -ne 0 ] && [ "$beside" -ne 5 ] && exit 1
    [ "$unit" -eq 5 ] && [ "$beside" -eq 5 ] && exit 5
    exit 0
) >"$beside_report" 2>&1 &
beside_pid=$!
trap 'kill "$beside_pid" "$archive_pid" 2>/dev/null; rm -f "$beside_report" "$archive_log"' \
    EXIT INT TERM

echo "== integration tests (the native core's checks, the unit tests, then ${BESIDE[*]}, run" \
     "beside them; their report follows)"
"$PYTEST" tests/integration "${ignored[@]}" -q --durations=25 "$@"  # where suite time goes
integration=$?

wait "$beside_pid"
beside=$?
if ! wait "$archive_pid"; then
    echo "make test: the Spark class archive was not built (its jobs started ~3 s slower):"
    tail -n 20 "$archive_log"
fi
archive_pid=  # reaped: the trap must not signal a pid since reused
echo "== the native core's checks, unit tests, then the integration tests run beside"
cat "$beside_report"

if [ "$integration" -eq 5 ] && [ "$beside" -eq 5 ]; then
    echo "make test: no test collected" >&2
    exit 5
fi
integration=$(collected "$integration")
beside=$(collected "$beside")
if [ "$integration" -ne 0 ] || [ "$beside" -ne 0 ]; then
    echo "make test: integration tests exit $integration, unit tests and those beside exit $beside" >&2
    exit 1
fi
