#!/usr/bin/env bash
# Installs the Debian packages strata builds and tests with.
set -euo pipefail
pkgs=(cmake g++ make pkg-config curl libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
      libpcre2-dev zlib1g-dev libcpp-httplib-dev clang libclang-rt-14-dev python3 python3-pip chromium chromium-driver)
python_pkgs=(gguf==0.19.0 numpy==2.4.6 openai==3.57.0 anthropic==2.14.0 selenium==4.51.0)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Test tooling only (independent checks of the engine); never used by the engine itself.
python3 -c "import gguf, numpy, openai, anthropic, selenium" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check "${python_pkgs[@]}" ||
  echo "install-deps: could not pip install ${python_pkgs[*]}; the dequantizer cross-check, server and web page tests will be skipped" >&2
