#!/usr/bin/env bash
# Build the native core (native/, Rust + PyO3) into .venv with maturin, when its sources
# changed since the last build (stamp .venv/.native-built) or .venv lacks the module.
# Finds cargo on PATH or in ~/.cargo/bin, else installs Debian's Rust (cargo-web/rustc-web
# on Debian 12, whose plain rustc is too old for PyO3; cargo/rustc elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=.venv/.native-built
changed=$(find native/Cargo.toml native/Cargo.lock native/pyproject.toml native/distributary_native.pyi native/src \
  -newer "$stamp" -print -quit 2>/dev/null || echo missing-stamp)
if [ -f "$stamp" ] && [ -z "$changed" ] && .venv/bin/python -c "import distributary_native" 2>/dev/null; then
  exit 0
fi

have() { command -v "$1" >/dev/null 2>&1; }
if ! have cargo && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! have cargo; then
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
fi

if [ ! -x .venv/bin/maturin ]; then
  echo "setup: installing maturin (builds the native core) into .venv"
  .venv/bin/pip install -q 'maturin>=1.9,<2'
fi
echo "setup: building the native core (native/, $(cargo --version)) into .venv"
if ! VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release --quiet \
    -m native/Cargo.toml; then
  echo "setup: building the native core failed (output above). It needs cargo and rustc" \
       ">= 1.74 ($(cargo --version 2>&1)), a C linker (cc: $(command -v cc || echo missing))" \
       "and the crates pinned in native/Cargo.lock from crates.io." >&2
  exit 1
fi
.venv/bin/python -c "import distributary_native" || {
  echo "setup: the native core was built but .venv/bin/python cannot import" \
       "distributary_native" >&2
  exit 1
}
touch "$stamp"
