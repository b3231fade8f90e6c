#!/usr/bin/env bash
# The native core (native/, Rust + PyO3) is part of the package: `pip install -e .` builds it
# with maturin (compose/setup.sh). This script runs before that, and again after it:
#   setup_native.sh toolchain  finds cargo on PATH or in ~/.cargo/bin, else installs Debian's
#                              Rust (cargo-web/rustc-web on Debian 12, whose plain rustc is
#                              too old for PyO3; cargo/rustc elsewhere)
#   setup_native.sh rebuild    rebuilds the module into .venv when a file of native/ (or its
#                              stub) changed since the last build (stamp .venv/.native-built),
#                              or .venv cannot import it
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }

toolchain() {
  if have cargo; then return; fi
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  if apt-cache show cargo-web >/dev/null 2>&1; then pkgs=(cargo-web rustc-web); else pkgs=(cargo rustc); fi
  echo "setup: no Rust toolchain found; installing Debian packages: ${pkgs[*]}"
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${pkgs[@]}" >/dev/null || ! have cargo; then
    echo "setup: the native core needs Rust (cargo and rustc >= 1.74) and none could be" \
         "installed: install ${pkgs[*]} (apt-get) or rustup, then run 'make setup' again" >&2
    exit 1
  fi
}

built_fails() {
  echo "setup: building the native core failed (output above). It needs cargo and rustc" \
       ">= 1.74 ($(cargo --version 2>&1)), a C linker (cc: $(command -v cc || echo missing))" \
       "and the crates pinned in native/Cargo.lock from crates.io." >&2
  exit 1
}

rebuild() {
  local stamp=.venv/.native-built changed
  changed=$(find native/Cargo.toml native/Cargo.lock native/src distributary_native.pyi \
    -newer "$stamp" -print -quit 2>/dev/null || echo missing-stamp)
  if [ -f "$stamp" ] && [ -z "$changed" ] && .venv/bin/python -c "import distributary_native" 2>/dev/null; then
    return
  fi
  echo "setup: building the native core (native/, $(cargo --version)) into .venv"
  local output  # pip's lines about every requirement already there: shown only on failure
  if ! output=$(VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release 2>&1); then
    printf '%s\n' "$output" >&2
    built_fails
  fi
  .venv/bin/python -c "import distributary_native" || {
    echo "setup: the native core was built but .venv/bin/python cannot import" \
         "distributary_native" >&2
    exit 1
  }
  touch "$stamp"
}

if ! have cargo && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
case "${1:-}" in
  toolchain) toolchain ;;
  rebuild) toolchain; rebuild ;;
  *) echo "usage: $0 toolchain|rebuild" >&2; exit 2 ;;
esac
