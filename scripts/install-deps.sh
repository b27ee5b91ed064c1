#!/usr/bin/env bash
# Installs the Debian packages kvslim builds and tests with (as root, or through sudo), when
# missing. With --build-only, only what configuring and building needs (scripts/demo.sh), not the
# tools the tests drive (chromium, clang, Node, Slurm, nginx, Python).
set -euo pipefail
packages=(build-essential cmake ninja-build libgtest-dev libbenchmark-dev libopenblas-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libicu-dev
          libcpp-httplib-dev pkg-config libssl-dev zlib1g-dev libbrotli-dev
          python3-dev pybind11-dev python3-pybind11 python3-numpy)  # the Python package (docs/python.md)
test_tools=1
case "${1:-}" in
  "") ;;
  --build-only) test_tools=0 ;;
  *) echo "usage: scripts/install-deps.sh [--build-only]" >&2; exit 2 ;;
esac
if [ $test_tools = 1 ]; then
  packages+=(chromium clang clang-format  # the web page's test in headless Chromium; the fuzz build; the style check
             slurm-wlm munge nginx python3 python3-yaml  # the scale-out tests (docs/scale-out.md)
             python3-pytest python3-pandas python3-pip python3-setuptools python3-venv python3-wheel)  # the Python tests, pip install
fi
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# The server tests drive kvslim serve with the OpenAI Node client (tests/node). A machine may
# already have Node with its own npm (not Debian's packages, which would conflict with it).
[ $test_tools = 0 ] || command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Installing slurm-wlm, munge and nginx must not start their system services (nginx would listen
# on every interface): the tests start their own, on 127.0.0.1 under a temporary folder. A
# policy-rc.d that denies every start is in place during the install, unless one already is.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod 755 /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Nor start them at the next boot, where systemd runs (only the services installed just now).
if command -v systemctl >/dev/null 2>&1; then
  for pair in nginx:nginx munge:munge slurm-wlm:slurmctld slurm-wlm:slurmd; do
    case " ${missing[*]} " in
      *" ${pair%%:*} "*) $sudo systemctl disable "${pair#*:}" >/dev/null 2>&1 || true ;;
    esac
  done
fi
