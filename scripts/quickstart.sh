#!/usr/bin/env bash
# One command: install dependencies, build, get a real model, and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if model=$(scripts/fetch-gemma.sh); then
  echo "model: $model"
else
  model=../shared/models/stories260K.gguf
  echo "Gemma 3 270M unavailable (no network?); using $model"
fi
build/strata run -m "$model" -p "${PROMPT:-Once upon a time, in a small village,}" -n "${N:-64}" --temp 0
