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
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing the package and its extras into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[all,dev]'
  touch "$stamp"
fi

bash compose/setup_native.sh

.venv/bin/python -m compose.launcher.fetch_jars
echo "setup: ok"
