#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: Debian packages, .venv, the native core, jars.
# `make setup` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql postgresql-contrib)
have redis-server || need_pkgs+=(redis-server)
have java || need_pkgs+=(openjdk-17-jdk-headless)
have mvn || need_pkgs+=(maven)
have chromium || need_pkgs+=(chromium)  # the status page test drives it headless
have cc || need_pkgs+=(gcc)  # the linker the native core's Rust build calls
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_pkgs[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  # The packages start services of their own where an init system runs; ours use free ports.
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  $PYTHON -m venv .venv
fi
# the package's build compiles its native core (native/, with maturin): Rust first
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
bash compose/setup_native.sh toolchain
# the crates' release build kept between checkouts (a fresh clone, as CI makes, compiles
# only the project's own crate: ~17 s less set-up on a 2-core machine)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${CACHE_DIR:-$HOME/.cache/distributary}/cargo-target}"
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing the package (and building its native core) with its extras into .venv"
  .venv/bin/pip install -q --upgrade pip
  # a checkout set up before the core was part of the package has it as a distribution of
  # its own, which would own (and could remove) the module's files
  .venv/bin/pip uninstall -q -y distributary-native >/dev/null 2>&1 || true
  rm -rf distributary.egg-info  # setuptools' metadata from then: stale, and on sys.path
  if ! .venv/bin/pip install -q -e '.[all,dev]'; then
    echo "setup: installing the package failed (output above); its native core needs cargo" \
         "and rustc >= 1.74, a C linker and the crates pinned in native/Cargo.lock" >&2
    exit 1
  fi
  touch "$stamp" .venv/.native-built
fi
bash compose/setup_native.sh rebuild  # when native/ changed since

.venv/bin/python -m compose.launcher.fetch_jars
# the JVM class archive Spark jobs map at start-up (built once per JDK and Spark version;
# only a speed-up, so a failure is reported and set-up goes on). `make test` builds it
# beside its first tests instead (SETUP_CLASS_ARCHIVE=later): a fresh .venv needs a new
# one, ~45 s of a JVM that need not hold up the checks before them.
if [ "${SETUP_CLASS_ARCHIVE:-now}" != later ]; then
  .venv/bin/python -m cdc.cli replay class-archive \
    || echo "setup: the Spark class archive was not built (jobs start ~3 s slower)" >&2
fi
# the project's own modules compiled once: where PYTHONDONTWRITEBYTECODE is set, Python
# never writes them, and every `cdc` process (a test suite starts hundreds) compiled them
# again at its start, ~0.25 s of CPU each. Python still checks each against its source
# and ignores a stale one. Test modules are left to pytest (it rewrites their asserts).
.venv/bin/python -m compileall -q -j 0 -x '(^|/)(test_[^/]*|conftest)\.py$' \
  cdc connectors derived spark_pipelines compose bench chaos soak tests >/dev/null \
  || echo "setup: compiling the project's modules failed (each process compiles them)" >&2
echo "setup: ok"
