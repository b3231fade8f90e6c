#!/usr/bin/env bash
# make test's pytest step: the unit tests run beside the integration tests (these spend
# much of their time waiting on servers, so the two share the machine's cores well); the
# unit tests' report is printed after the integration tests'. Fails if either fails.
# Arguments are passed to both runs (PYTEST_ARGS).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=.venv/bin/pytest

unit_report=$(mktemp -t distributary-unit-XXXXXX.log)
trap 'rm -f "$unit_report"' EXIT

"$PYTEST" tests/unit -q "$@" >"$unit_report" 2>&1 &
unit_pid=$!
trap 'kill "$unit_pid" 2>/dev/null; rm -f "$unit_report"' EXIT INT TERM

echo "== integration tests (the unit tests run beside them; their report follows)"
"$PYTEST" tests/integration -q --durations=25 "$@"  # the slowest: where suite time goes
integration=$?

wait "$unit_pid"
unit=$?
echo "== unit tests"
cat "$unit_report"

# 5: nothing collected in that half (e.g. PYTEST_ARGS="-k …" picks tests of the other only)
if [ "$integration" -eq 5 ] && [ "$unit" -ne 5 ]; then integration=0; fi
if [ "$unit" -eq 5 ] && [ "$integration" -ne 5 ]; then unit=0; fi
if [ "$integration" -ne 0 ] || [ "$unit" -ne 0 ]; then
    echo "make test: integration tests exit $integration, unit tests exit $unit" >&2
    exit 1
fi
