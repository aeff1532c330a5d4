#!/usr/bin/env bash
# Creates the Python "peer" venv used to regenerate the golden fixtures.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${PEER_VENV:-$ROOT/.venv-peer}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -r "$ROOT/tests/peer/requirements.txt"
"$VENV/bin/python" -c 'import mlx.core as mx, mlx_lm, transformers, gguf; print("peer venv ok:", "'"$VENV"'", "mlx", mx.__version__)'
