#!/usr/bin/env bash
# The numpy matrix (issue 12 section 3): re-derive the fixed MedEval-1 v0.2 corpus byte for byte under the
# oldest numpy the project supports and the newest, each in a small core-only venv (no torch).
#   .ci/numpy_matrix.sh                 # oldest = 1.26.4 (pyproject: numpy>=1.26), newest = latest on PyPI
#   NUMPY_VERSIONS="1.26.4 2.4.6" PYTHON=python3.11 .ci/numpy_matrix.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
versions=${NUMPY_VERSIONS:-"1.26.4 latest"}
for version in $versions; do
  venv=".ci/venv-numpy-$version"
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  if [ "$version" = latest ]; then spec=numpy; else spec="numpy==$version"; fi
  "$venv/bin/python" -m pip install -q . "$spec" pytest
  installed=$("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')
  echo "numpy matrix: numpy $installed"
  if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "numpy matrix: torch is installed in the core venv" >&2; exit 1
  fi
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_metrics_corpus.py
  rm -rf "$venv"
done
echo "numpy matrix: the v0.2 corpus re-derives byte for byte, and v0.1 draws the same streams, under numpy $versions"
