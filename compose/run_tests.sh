#!/usr/bin/env bash
# make test's pytest step, in three streams that share the machine's cores (the integration
# tests spend much of their time waiting on servers):
#   - the integration tests, but for the ones listed in BESIDE and SPARK;
#   - beside them, the native core's checks, the unit tests, then the BESIDE ones:
#     self-contained groups that start what they need (the PostgreSQL versions' servers,
#     package installs, the short chaos runs, the secret-leak sweep);
#   - and the SPARK ones (Spark jobs, in the shared Spark session where they can).
# Two streams were balanced by their durations until 2026-12-01 (on this 2-core machine:
# integration 27:33 against 0:30 native + 3:31 unit + 24:03 Spark and the rest, 28:58 in
# all, the machine ~75 % busy); the Spark tests then got a stream of their own, and the
# PostgreSQL versions' tests (~4:20) moved from the integration stream beside the unit tests.
# The other streams' reports are printed after the first's. Fails if any run fails.
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
BESIDE=(tests/integration/versions tests/integration/packaging
        tests/integration/chaos/test_chaos_short.py
        tests/integration/security/test_no_secret_leaks.py)
SPARK=(tests/integration/spark tests/integration/capture/test_schema_spark.py)

# The Spark jobs' class archive (make setup's last step; `make test` leaves it to here when
# SETUP_CLASS_ARCHIVE=later): built beside the first tests, none of which needs it, and
# it is only a speed-up (a job started before it is in place starts without it).
archive_log=$(mktemp -t distributary-class-archive-XXXXXX.log)
.venv/bin/python -m cdc.cli replay class-archive >"$archive_log" 2>&1 &
archive_pid=$!

ignored=()
for path in "${BESIDE[@]}" "${SPARK[@]}"; do ignored+=("--ignore=$path"); done

# 5: nothing collected (e.g. PYTEST_ARGS="-k …" picks tests of another run only)
collected() { [ "$1" -eq 5 ] && echo 0 || echo "$1"; }

beside_report=$(mktemp -t distributary-beside-XXXXXX.log)
spark_report=$(mktemp -t distributary-spark-XXXXXX.log)
trap 'kill "$archive_pid" 2>/dev/null; rm -f "$beside_report" "$spark_report" "$archive_log"' EXIT
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
"$PYTEST" "${SPARK[@]}" -q --durations=10 "$@" >"$spark_report" 2>&1 &
spark_pid=$!
trap 'kill "$beside_pid" "$spark_pid" "$archive_pid" 2>/dev/null
      rm -f "$beside_report" "$spark_report" "$archive_log"' EXIT INT TERM

echo "== integration tests (the native core's checks, the unit tests, then ${BESIDE[*]}, run" \
     "beside them, and ${SPARK[*]}; their reports follow)"
"$PYTEST" tests/integration "${ignored[@]}" -q --durations=25 "$@"  # where suite time goes
integration=$?

wait "$beside_pid"
beside=$?
wait "$spark_pid"
spark=$?
beside_pid= spark_pid=  # reaped: the trap must not signal pids since reused
if ! wait "$archive_pid"; then
    echo "make test: the Spark class archive was not built (its jobs started ~3 s slower):"
    tail -n 20 "$archive_log"
fi
archive_pid=  # reaped: the trap must not signal a pid since reused
echo "== the native core's checks, unit tests, then the integration tests run beside"
cat "$beside_report"
echo "== the Spark tests (${SPARK[*]})"
cat "$spark_report"

if [ "$integration" -eq 5 ] && [ "$beside" -eq 5 ] && [ "$spark" -eq 5 ]; then
    echo "make test: no test collected" >&2
    exit 5
fi
integration=$(collected "$integration")
beside=$(collected "$beside")
spark=$(collected "$spark")
if [ "$integration" -ne 0 ] || [ "$beside" -ne 0 ] || [ "$spark" -ne 0 ]; then
    echo "make test: integration tests exit $integration, unit tests and those beside exit" \
         "$beside, Spark tests exit $spark" >&2
    exit 1
fi
