#!/usr/bin/env bash
# Installs the Debian packages kvslim builds with (as root, or through sudo).
set -euo pipefail
packages=(build-essential cmake ninja-build libgtest-dev libbenchmark-dev libopenblas-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libicu-dev
          libcpp-httplib-dev pkg-config libssl-dev zlib1g-dev libbrotli-dev
          chromium clang)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# The server tests drive kvslim serve with the OpenAI Node client (tests/node). A machine may
# already have Node with its own npm (not Debian's packages, which would conflict with it).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
