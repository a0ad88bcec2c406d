#!/usr/bin/env bash
# yamblab set-up and entry points.
#   ./run.sh main   set up from nothing, then run the main job (a small ablation sweep)
#   ./run.sh test   set up from nothing, then run the test suite
#   ./run.sh yamb   set up from nothing, then run Yamb's ablation (about 50 minutes)
# Set-up: a virtual environment in .venv (override with YAMBLAB_VENV), PyTorch's CPU build
# first when the machine has no NVIDIA GPU, then yamblab itself (Cython extensions built here).
set -euo pipefail
cd "$(dirname "$0")"
VENV="${YAMBLAB_VENV:-.venv}"
PY="$VENV/bin/python"

setup() {
  if [ ! -x "$PY" ]; then
    echo "== creating virtual environment $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.yamblab-installed"
  local want
  want="$(cat pyproject.toml setup.py yamblab/*/*.pyx yamblab/*/*.pxi yamblab/*/*/*.pyx yamblab/*/*/*.pxi 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$PY" -c "import yamblab.oracle.yahtzee._kernels" 2>/dev/null; then
    return 0
  fi
  echo "== installing dependencies (first run: a few minutes)"
  "$PY" -m pip install -q --upgrade pip setuptools wheel
  if ! "$PY" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      "$PY" -m pip install -q "torch>=2.4,<3"
    else
      # No GPU: take the CPU build (a bare 'torch' requirement would pull a multi-GB CUDA build).
      "$PY" -m pip install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
    fi
  fi
  "$PY" -m pip install -q "Cython>=3.0" "numpy>=1.26"
  "$PY" -m pip install -q --no-build-isolation -e ".[test]"
  echo "$want" > "$stamp"
}

browser() {
  # The browser tests drive Debian's Chromium with Selenium (no browser download from the web).
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Chromium and chromedriver for the browser tests"
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; then
      return 0
    fi
  fi
  echo "== no Chromium: the browser tests will be skipped (apt-get install chromium chromium-driver)"
}

cmd="${1:-main}"
shift || true
case "$cmd" in
  main)
    setup
    exec "$VENV/bin/yamblab" sweep experiments/ablation-small.yaml "$@"
    ;;
  yamb)
    setup
    exec "$VENV/bin/yamblab" sweep experiments/ablation-yamb.yaml "$@"
    ;;
  baseline)
    setup
    exec "$VENV/bin/yamblab" baseline "$@"
    ;;
  test)
    setup
    browser
    exec "$PY" -m pytest -q "$@"
    ;;
  setup)
    setup
    ;;
  *)
    echo "usage: ./run.sh main|test|yamb|baseline|setup [args...]" >&2
    exit 2
    ;;
esac
