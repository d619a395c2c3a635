#!/usr/bin/env bash
# Install everything the co-simulator needs on Debian/Ubuntu, then build the engines:
#   system packages (compiler, CMake, ZeroMQ, protobuf, GoogleTest, Python headers), a virtual
#   environment in .venv with the Python package installed editable, and the native engines in
#   build/external.
# Run as root, or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS="build-essential cmake pkg-config libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler \
      libgtest-dev python3 python3-dev python3-venv python3-pip"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $missing >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e .

scripts/build_engines.sh
echo "setup complete: .venv/bin/cais-sim is ready"
